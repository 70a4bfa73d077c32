/**
 * Readers of Arrow IPC files that this project did not write, for tests that our stage files are
 * plain Arrow anyone can read: Rust Polars (`npm:nodejs-polars`, a native addon: needs --allow-ffi)
 * and `npm:@uwdata/flechette` (an independent TypeScript Arrow reader). Both return the same small
 * summary: each column's type as the reader names it, and its values as plain JS.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import pl from "nodejs-polars";
import { tableFromIPC } from "@uwdata/flechette";

/** A file as another reader sees it. */
export interface ForeignTable {
  rows: number;
  /** Column name → the reader's type name (Polars dtype, or flechette's Arrow type). */
  types: Record<string, string>;
  /** Column name → values as plain JS (lists as arrays, structs as objects). */
  column(name: string): unknown[];
}

/** Reads an Arrow IPC file with Rust Polars. Polars names types like `List(Int32)`, `Struct(…)`, `String`. */
export async function readWithPolars(path: string): Promise<ForeignTable> {
  // A string argument would be taken as inline data unless it ends in ".ipc"; bytes are unambiguous.
  const df = pl.readIPC(Buffer.from(await Deno.readFile(path)));
  const types: Record<string, string> = {};
  for (const [name, dtype] of Object.entries(df.schema)) types[name] = polarsTypeName(String(dtype));
  return {
    rows: df.height,
    types,
    column: (name) => df.getColumn(name).toArray().map(plain),
  };
}

/** `DataType(List(DataType(Int32)))` as Polars prints it, without the wrappers: `List(Int32)`. */
export function polarsTypeName(printed: string): string {
  let out = "";
  const closers: boolean[] = []; // per open parenthesis: whether it belongs to a `DataType(` wrapper
  for (let i = 0; i < printed.length; i++) {
    if (printed.startsWith("DataType(", i)) {
      closers.push(true);
      i += "DataType(".length - 1;
    } else if (printed[i] === "(") {
      closers.push(false);
      out += "(";
    } else if (printed[i] === ")") {
      if (!closers.pop()) out += ")";
    } else out += printed[i];
  }
  return out;
}

/** Reads an Arrow IPC file with flechette. Types are named `Int32`, `List<Uint8>`, `Struct<{…}>`, `Utf8`. */
export async function readWithFlechette(path: string): Promise<ForeignTable> {
  const table = tableFromIPC(await Deno.readFile(path), { useProxy: false });
  const types: Record<string, string> = {};
  for (const field of table.schema.fields) types[field.name] = flechetteTypeName(field.type);
  return {
    rows: table.numRows,
    types,
    column: (name) => Array.from(table.getChild(name)?.toArray() ?? [], plain),
  };
}

/** Arrow type ids as in the Arrow format's Schema.fbs (flechette exposes the raw ids). */
const TYPE_IDS: Record<number, string> = {
  1: "Bool",
  2: "Int",
  3: "Float",
  5: "Utf8",
  6: "Bool",
  12: "List",
  13: "Struct",
};

interface FlechetteType {
  typeId: number;
  bitWidth?: number;
  signed?: boolean;
  precision?: number;
  children?: Array<{ name: string; type: FlechetteType }>;
}

/** `Int32`, `Uint8`, `Float32`, `Float64`, `Utf8`, `Bool`, `List<…>`, `Struct<{name:type, …}>`. */
export function flechetteTypeName(t: FlechetteType): string {
  switch (TYPE_IDS[t.typeId]) {
    case "Int":
      return `${t.signed ? "Int" : "Uint"}${t.bitWidth}`;
    case "Float":
      return ["Float16", "Float32", "Float64"][t.precision ?? 0];
    case "List":
      return `List<${flechetteTypeName(t.children![0].type)}>`;
    case "Struct":
      return `Struct<{${t.children!.map((c) => `${c.name}:${flechetteTypeName(c.type)}`).join(", ")}}>`;
    case undefined:
      return `type#${t.typeId}`;
    default:
      return TYPE_IDS[t.typeId];
  }
}

/** Typed arrays to arrays, nested; objects (struct rows) keep their keys. */
function plain(value: unknown): unknown {
  if (ArrayBuffer.isView(value) && !(value instanceof DataView)) {
    return Array.from(value as unknown as ArrayLike<number>, Number);
  }
  if (Array.isArray(value)) return value.map(plain);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, plain(v)]));
  }
  return value;
}
