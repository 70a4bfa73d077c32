/**
 * Arrow column types used by stage files: constructors for the declarations, structural equality for
 * the reader's checks, and the typed arrays that back numeric columns.
 *
 * Only the types the contract needs are supported: Bool, Int16, Int32, Uint8, Float32, Float64, Utf8,
 * List<numeric> and List<Struct<…>>. Strings are plain Utf8 (never dictionaries: separate
 * dictionaries per batch break Arrow JS's file writer, see docs/ENGINE_FACTS.md).
 *
 * @module
 */

import {
  Bool,
  type DataType,
  Field,
  Float32,
  Float64,
  Int16,
  Int32,
  List,
  Struct,
  Type,
  Uint8,
  Utf8,
} from "apache-arrow";

/** Typed arrays that hold the values of numeric columns and numeric list columns. */
export type NumericArray = Int16Array | Int32Array | Uint8Array | Float32Array | Float64Array;

/** A constructor of one of the {@link NumericArray} types. */
export type NumericArrayCtor =
  | Int16ArrayConstructor
  | Int32ArrayConstructor
  | Uint8ArrayConstructor
  | Float32ArrayConstructor
  | Float64ArrayConstructor;

/** The column types of the contract, as Arrow JS DataType instances (fresh objects each call). */
export const t = {
  bool: (): DataType => new Bool(),
  int16: (): DataType => new Int16(),
  int32: (): DataType => new Int32(),
  uint8: (): DataType => new Uint8(),
  float32: (): DataType => new Float32(),
  float64: (): DataType => new Float64(),
  utf8: (): DataType => new Utf8(),
  /** List<item>; the child is named "item" as pyarrow names it. */
  list: (item: DataType): DataType => new List(new Field("item", item, false)),
  /** Struct<{…}> with fields in the given order. */
  struct: (fields: Record<string, DataType>): DataType =>
    new Struct(Object.entries(fields).map(([name, type]) => new Field(name, type, false))),
};

/** Whether `type` is List<…>. */
export function isList(type: DataType): type is List {
  return type.typeId === Type.List;
}

/** The element type of a List type. */
export function listItem(type: DataType): DataType {
  return (type as List).children[0].type;
}

/** Whether `type` is a list of numbers (readable as a flat typed array plus offsets). */
export function isNumericList(type: DataType): boolean {
  return isList(type) && arrayCtorFor(listItem(type)) !== undefined;
}

/** Whether `type` is Struct<…>. */
export function isStruct(type: DataType): type is Struct {
  return type.typeId === Type.Struct;
}

/** The typed array that holds values of a numeric (non-Bool) type, or undefined for other types. */
export function arrayCtorFor(type: DataType): NumericArrayCtor | undefined {
  const ctor = (type as { ArrayType?: unknown }).ArrayType;
  const numeric = [Int16Array, Int32Array, Uint8Array, Float32Array, Float64Array] as unknown[];
  const isNumericType = type.typeId === Type.Int || type.typeId === Type.Float;
  return isNumericType && numeric.includes(ctor) ? ctor as NumericArrayCtor : undefined;
}

/** A short name for a type, as Arrow JS prints it (`List<Int32>`, `Struct<{turn:Int16, …}>`). */
export function typeName(type: DataType): string {
  return String(type);
}

/**
 * Structural equality of two types: same type id, width, sign and precision, same list item type,
 * same struct field names (in order) and types. Field nullability and the list child's name are not
 * compared, so files written by pyarrow or polars with the same logical types are accepted.
 */
export function sameType(a: DataType, b: DataType): boolean {
  if (a.typeId !== b.typeId) return false;
  const x = a as unknown as Record<string, unknown>;
  const y = b as unknown as Record<string, unknown>;
  for (const key of ["bitWidth", "isSigned", "precision"]) {
    if (x[key] !== y[key]) return false;
  }
  const ac = a.children ?? [];
  const bc = b.children ?? [];
  if (ac.length !== bc.length) return false;
  for (let i = 0; i < ac.length; i++) {
    if (isStruct(a) && ac[i].name !== bc[i].name) return false;
    if (!sameType(ac[i].type, bc[i].type)) return false;
  }
  return true;
}
