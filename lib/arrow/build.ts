/**
 * Turns what a stage hands the writer into one Arrow Data chunk of the declared type, checking it:
 * typed arrays and flat lists pass through without copying; JS arrays are converted with every value
 * checked; Arrow vectors (carried from an input file) are type-checked and kept as they are.
 *
 * @module
 */

import { Data, type DataType, makeBuilder, makeData, Type, Vector } from "apache-arrow";
import { UserError } from "../errors.ts";
import { FlatList, flatOfVector, listData, listFromArrays } from "./columns.ts";
import {
  arrayCtorFor,
  isList,
  isNumericList,
  isStruct,
  listItem,
  type NumericArray,
  sameType,
  typeName,
} from "./types.ts";

/**
 * One column as a stage supplies it: an Arrow Vector or Data, a {@link FlatList} (numeric lists), a
 * typed array (numeric columns), or a JS array (strings, booleans, numbers, one array per row for
 * lists, one array of objects per row for struct lists).
 */
export type ColumnInput = Vector | Data | FlatList | NumericArray | readonly unknown[];

/** Where a column is being built, for error messages. */
export interface ColumnContext {
  path: string;
  name: string;
  type: DataType;
}

/** Builds one Data chunk of `ctx.type` from `input`; a UserError names the column on bad input. */
export function toData(ctx: ColumnContext, input: ColumnInput): Data {
  if (input instanceof Vector || input instanceof Data) return fromArrow(ctx, input);
  const { type } = ctx;
  if (isList(type)) return listToData(ctx, input);
  const ctor = arrayCtorFor(type);
  if (ctor) {
    const data = numericValues(ctx, input, type);
    return makeData({ type, length: data.length, nullCount: 0, data } as never);
  }
  if (type.typeId === Type.Bool) return viaBuilder(ctx, checkEach(ctx, input, isBoolean, "a boolean"));
  if (type.typeId === Type.Utf8) {
    return viaBuilder(ctx, checkEach(ctx, input, isText, "a well-formed string"));
  }
  throw new Error(`toData: unsupported declared type ${typeName(type)} for ${ctx.name}`);
}

function fromArrow(ctx: ColumnContext, input: Vector | Data): Data {
  if (!sameType(input.type, ctx.type)) {
    throw bad(ctx, `has type ${typeName(input.type)} but the contract declares ${typeName(ctx.type)}`);
  }
  const chunks = input instanceof Vector ? input.data : [input];
  if (chunks.length === 1 && chunks[0].nullCount === 0) return chunks[0];
  // Several chunks (a file written elsewhere in several batches): merge into one.
  const vector = input instanceof Vector ? input : new Vector([input]);
  if (vector.nullCount > 0) throw bad(ctx, "holds null values");
  if (isNumericList(ctx.type)) return listToData(ctx, flatOfVector(vector)!);
  return viaBuilder(ctx, Array.from(vector, (v) => isStruct(listItemOr(ctx.type)) ? structRows(v) : v));
}

function listToData(ctx: ColumnContext, input: ColumnInput): Data {
  const item = listItem(ctx.type);
  const ctor = arrayCtorFor(item);
  if (ctor) {
    const flat = input instanceof FlatList ? input : listFromArrays(rowsOf(ctx, input), ctor);
    const values = flat.values instanceof ctor ? flat.values : convertNumbers(ctx, flat.values, item);
    return listData(ctx.type, new FlatList(values, flat.offsets));
  }
  if (isStruct(item)) return viaBuilder(ctx, structListRows(ctx, input, item));
  throw new Error(`toData: unsupported list item ${typeName(item)} for ${ctx.name}`);
}

function rowsOf(ctx: ColumnContext, input: ColumnInput): ArrayLike<number>[] {
  if (!Array.isArray(input)) {
    throw bad(ctx, "must be a FlatList (listColumn / listFromArrays) or one array per row");
  }
  input.forEach((row, i) => {
    if (!ArrayBuffer.isView(row) && !Array.isArray(row)) throw bad(ctx, `row ${i} is not an array`);
  });
  return input as ArrayLike<number>[];
}

function numericValues(ctx: ColumnContext, input: ColumnInput, type: DataType): NumericArray {
  const ctor = arrayCtorFor(type)!;
  if (input instanceof ctor) return input as NumericArray;
  if (!Array.isArray(input) && !ArrayBuffer.isView(input)) {
    throw bad(ctx, "must be a typed array or an array of numbers");
  }
  return convertNumbers(ctx, input as ArrayLike<unknown>, type);
}

/** Copies numbers into the declared typed array, refusing non-numbers and ints out of range. */
function convertNumbers(ctx: ColumnContext, input: ArrayLike<unknown>, type: DataType): NumericArray {
  const ctor = arrayCtorFor(type)!;
  const out = new ctor(input.length);
  const isInt = type.typeId === Type.Int;
  for (let i = 0; i < input.length; i++) {
    const v = input[i];
    if (typeof v !== "number") throw bad(ctx, `value ${i} is ${showType(v)}, not a number`);
    out[i] = v;
    if (isInt && out[i] !== v) {
      throw bad(ctx, `value ${i} (${v}) is not an integer that fits ${typeName(type)}`);
    }
  }
  return out;
}

function structListRows(ctx: ColumnContext, input: ColumnInput, item: DataType): unknown[] {
  if (!Array.isArray(input)) throw bad(ctx, "must be one array of objects per row");
  const fields = item.children;
  input.forEach((row, i) => {
    if (!Array.isArray(row)) throw bad(ctx, `row ${i} is not an array`);
    row.forEach((obj: unknown, j: number) => {
      if (obj === null || typeof obj !== "object") throw bad(ctx, `row ${i} item ${j} is not an object`);
      for (const f of fields) {
        const v = (obj as Record<string, unknown>)[f.name];
        const want = f.type.typeId === Type.Utf8 ? "string" : "number";
        if (typeof v !== want || (want === "string" && !isText(v))) {
          throw bad(ctx, `row ${i} item ${j} field "${f.name}" is ${showType(v)}, not a ${want}`);
        }
      }
    });
  });
  return input;
}

function checkEach(
  ctx: ColumnContext,
  input: ColumnInput,
  ok: (v: unknown) => boolean,
  what: string,
): readonly unknown[] {
  if (!Array.isArray(input)) throw bad(ctx, `must be an array of values, each ${what}`);
  input.forEach((v, i) => {
    if (!ok(v)) throw bad(ctx, `value ${i} is ${showType(v)}, not ${what}`);
  });
  return input;
}

/** Builds one chunk through an Arrow builder (strings, booleans, struct lists). */
function viaBuilder(ctx: ColumnContext, values: readonly unknown[]): Data {
  const builder = makeBuilder({ type: ctx.type, nullValues: [null, undefined] });
  for (const v of values) builder.append(v);
  const data = builder.finish().flush();
  if (data.nullCount > 0) throw bad(ctx, "holds null values");
  return data;
}

function structRows(v: unknown): unknown {
  return v instanceof Vector ? Array.from(v, (row) => (row as { toJSON(): unknown }).toJSON()) : v;
}

function listItemOr(type: DataType): DataType {
  return isList(type) ? listItem(type) : type;
}

const isBoolean = (v: unknown) => typeof v === "boolean";
/** Lone surrogates would be replaced by U+FFFD on encoding; refuse them so text round-trips exactly. */
const isText = (v: unknown) => typeof v === "string" && v.isWellFormed();

function showType(v: unknown): string {
  return v === null ? "null" : Array.isArray(v) ? "an array" : typeof v;
}

function bad(ctx: ColumnContext, why: string): UserError {
  return new UserError(`writing ${ctx.path}: column "${ctx.name}"`, {
    why: `it ${why} (declared ${typeName(ctx.type)})`,
    fix: "pass values of the declared type (see lib/arrow/kinds.ts)",
  });
}
