/**
 * Validation of a parsed stage file's column bodies, before any stage reads a value. Arrow JS trusts
 * what a file says: list offsets that point far outside their values (or go down) become rows of 2^31
 * elements that a stage then loops over, lengths are taken from the metadata, null counts are not
 * compared with anything (docs/ENGINE_FACTS.md, "Arrow JS"). A file whose manifest matches can still
 * hold such bodies (rewritten after the damage, or written by another program), so the reader checks,
 * for every column the kind declares (or matches by pattern):
 *
 * - its length equals the record batch's row count, and it holds no nulls (stage files never do);
 * - fixed-width values and Bool bitmaps are long enough for their length;
 * - Utf8 and List offsets: enough of them, the first not negative, never going down, the last inside
 *   the values; Utf8 bytes are valid UTF-8 and no string starts inside a character; list children and
 *   struct fields are checked the same way, recursively;
 * - the declared value rules (`values` in lib/arrow/kinds.ts): token ids and turn indices not negative,
 *   flags 0 or 1, log-probs and advantages finite, prompt_len within its row's tokens;
 * - per-token lists (`perToken`) have exactly one entry per token in every row.
 *
 * Every loop runs over a range already checked against its buffer, so the work is linear in the file
 * size. A failure is a one-line UserError naming the file, the column, the row where one is known, and
 * what is wrong.
 *
 * @module
 */

import { type Data, type Table, Type } from "apache-arrow";
import { UserError } from "../errors.ts";
import {
  type ColumnDecl,
  findColumn,
  rerunHint,
  resolveKind,
  type StageKind,
  type ValueRule,
} from "./kinds.ts";

/** Text is checked in slices this large, so no string of the whole column is ever built. */
const UTF8_SLICE = 1 << 20;

/** Names an entry in messages: `row 3` for a column's own rows, `item 3 of field "name"` inside. */
type Place = (i: number) => string;

/** Checks every declared column of every record batch of `table`; throws a UserError on the first fault. */
export function validateBodies(path: string, kind: StageKind, table: Table): void {
  const decl = resolveKind(kind);
  let firstRow = 0;
  for (const batch of table.batches) {
    if (batch.numRows === 0) continue; // nothing to read (ipc_bounds.ts checked every column's length)
    const checked = new Map<string, { decl: ColumnDecl; data: Data }>();
    table.schema.fields.forEach((field, i) => {
      const c = findColumn(decl, field.name);
      if (!c) return; // not part of the kind: kept in the table, never read by a stage
      const data = batch.data.children[i];
      const fault = data.length !== batch.numRows
        ? `it has ${data.length} values but the file has ${batch.numRows} rows`
        : arrayFault(data, (r) => `row ${firstRow + r}`);
      if (fault) throw invalid(path, c, fault);
      checked.set(c.name, { decl: c, data });
    });
    checkValues(path, checked, firstRow);
    firstRow += batch.numRows;
  }
}

function invalid(path: string, c: ColumnDecl, fault: string): UserError {
  return new UserError(`stage file ${path}: column "${c.name}"`, {
    why: `its data is invalid: ${fault}`,
    fix: `${rerunHint(c.stage)} to rewrite it, or restore the file from a good copy`,
  });
}

/** What is structurally wrong with `d` (and its children), or null. */
function arrayFault(d: Data, place: Place): string | null {
  // An empty array has nothing to read (and Arrow JS's stand-in batch for a file without record
  // batches has no buffers or children at all).
  if (d.length === 0) return null;
  const nulls = d.nullCount;
  if (nulls !== 0) return `it has ${nulls} null values; stage files hold none`;
  const end = d.offset + d.length;
  switch (d.typeId) {
    case Type.Int:
    case Type.Float: {
      const n = (d.values as ArrayLike<number>).length;
      return n < end ? `its values buffer holds ${n} values for ${d.length} entries` : null;
    }
    case Type.Bool: {
      const bits = (d.values as Uint8Array).length * 8;
      return bits < end ? `its values bitmap holds ${bits} bits for ${d.length} entries` : null;
    }
    case Type.Utf8: {
      const bytes = d.values as Uint8Array;
      return offsetsFault(d, bytes.length, "bytes", place) ?? utf8Fault(d, bytes, place);
    }
    case Type.List: {
      const child = d.children[0];
      return offsetsFault(d, child.length, "values", place) ??
        prefixed("its list items", arrayFault(child, (i) => `item ${i}`));
    }
    case Type.Struct:
      for (const [k, child] of d.children.entries()) {
        const name = d.type.children[k].name;
        if (child.length < end) return `field "${name}" holds ${child.length} values for ${d.length} entries`;
        const fault = arrayFault(child, (i) => `item ${i} of field "${name}"`);
        if (fault) return `field "${name}": ${fault}`;
      }
      return null;
    default:
      return null; // not a type of the contract: the type check before this refuses it
  }
}

function prefixed(prefix: string, fault: string | null): string | null {
  return fault && `${prefix}: ${fault}`;
}

/** Offsets of a Utf8 or List array: enough, first ≥ 0, never going down, last ≤ `limit`. */
function offsetsFault(d: Data, limit: number, unit: string, place: Place): string | null {
  const o = d.valueOffsets as Int32Array;
  if (o.length < d.offset + d.length + 1) {
    return `its offsets buffer holds ${o.length} offsets for ${d.length} entries (needs ${d.length + 1})`;
  }
  if (o[d.offset] < 0) return `${place(0)} starts at offset ${o[d.offset]}`;
  for (let i = 0; i < d.length; i++) {
    const [a, b] = [o[d.offset + i], o[d.offset + i + 1]];
    if (b < a) return `${place(i)}: its offsets go down (${a} then ${b})`;
  }
  const last = o[d.offset + d.length];
  return last > limit ? `its last offset ${last} is past its ${limit} ${unit}` : null;
}

/** Utf8 bytes (offsets already checked): valid UTF-8, and no string starting inside a character. */
function utf8Fault(d: Data, bytes: Uint8Array, place: Place): string | null {
  const o = d.valueOffsets as Int32Array;
  const [start, end] = [o[d.offset], o[d.offset + d.length]];
  for (let i = 0; i < d.length; i++) {
    const at = o[d.offset + i];
    if (at < end && (bytes[at] & 0xc0) === 0x80) return `${place(i)} starts inside a UTF-8 character`;
  }
  const decoder = new TextDecoder("utf-8", { fatal: true });
  try {
    for (let at = start; at < end; at += UTF8_SLICE) {
      decoder.decode(bytes.subarray(at, Math.min(end, at + UTF8_SLICE)), { stream: true });
    }
    decoder.decode();
    return null;
  } catch {
    // Find the row (only on failure): strings are checked one by one until one fails.
    for (let i = 0; i < d.length; i++) {
      try {
        new TextDecoder("utf-8", { fatal: true }).decode(
          bytes.subarray(o[d.offset + i], o[d.offset + i + 1]),
        );
      } catch {
        return `${place(i)} is not valid UTF-8`;
      }
    }
    return "its text is not valid UTF-8";
  }
}

/** How each value rule reads in a message. */
const MEANING: Record<ValueRule, string> = {
  non_negative: "it is never negative",
  zero_or_one: "it must be 0 or 1",
  finite: "it must be a finite number",
  prompt_length: "it is a number of tokens, never negative",
};

/**
 * Index of the first value in `[from, to)` that breaks `rule`, or -1. One plain loop per rule: these
 * run over every token of the file, and a call per value would double the read time.
 */
function firstBreaking(values: ArrayLike<number>, from: number, to: number, rule: ValueRule): number {
  switch (rule) {
    case "non_negative":
    case "prompt_length":
      for (let k = from; k < to; k++) if (!(values[k] >= 0)) return k;
      return -1;
    case "zero_or_one":
      for (let k = from; k < to; k++) if (values[k] !== 0 && values[k] !== 1) return k;
      return -1;
    case "finite":
      for (let k = from; k < to; k++) if (values[k] - values[k] !== 0) return k; // NaN for NaN and ±Infinity
      return -1;
  }
}

/** A checked numeric column: its values, and for a list its row offsets (rows + 1) into them. */
interface Flat {
  offsets: Int32Array | null;
  values: ArrayLike<number>;
}

function flat(d: Data): Flat {
  if (d.typeId !== Type.List) {
    return {
      offsets: null,
      values: (d.values as ArrayLike<number> & { subarray(a: number, b: number): ArrayLike<number> })
        .subarray(d.offset, d.offset + d.length),
    };
  }
  const offsets = (d.valueOffsets as Int32Array).subarray(d.offset, d.offset + d.length + 1);
  return { offsets, values: d.children[0].values as ArrayLike<number> };
}

/** Value rules and per-token alignment of one record batch's structurally checked columns. */
function checkValues(
  path: string,
  columns: Map<string, { decl: ColumnDecl; data: Data }>,
  firstRow: number,
): void {
  const tokens = columns.get("tokens");
  const tokenRows = tokens && flat(tokens.data).offsets;
  for (const { decl, data } of columns.values()) {
    if (!decl.perToken && !decl.values) continue;
    const col = flat(data);
    if (decl.perToken && tokenRows && col.offsets) {
      const fault = alignmentFault(col.offsets, tokenRows, firstRow);
      if (fault) throw invalid(path, decl, fault);
    }
    if (!decl.values) continue;
    const fault = ruleFault(col, decl.values, firstRow) ??
      (decl.values === "prompt_length" && tokenRows ? promptFault(col.values, tokenRows, firstRow) : null);
    if (fault) throw invalid(path, decl, fault);
  }
}

/** The first row whose length differs between `own` and `tokens` offsets. */
function alignmentFault(own: Int32Array, tokens: Int32Array, firstRow: number): string | null {
  for (let i = 0; i + 1 < own.length; i++) {
    const [n, t] = [own[i + 1] - own[i], tokens[i + 1] - tokens[i]];
    if (n !== t) return `row ${firstRow + i} has ${n} entries for ${t} tokens (one per token)`;
  }
  return null;
}

function ruleFault(col: Flat, rule: ValueRule, firstRow: number): string | null {
  const [from, to] = col.offsets
    ? [col.offsets[0], col.offsets[col.offsets.length - 1]]
    : [0, col.values.length];
  const k = firstBreaking(col.values, from, to, rule);
  return k < 0 ? null : `${rowOf(col, k, firstRow)} holds ${col.values[k]}; ${MEANING[rule]}`;
}

/** `row r` for value index `k` (the row whose range holds it). */
function rowOf(col: Flat, k: number, firstRow: number): string {
  if (!col.offsets) return `row ${firstRow + k}`;
  let r = 0;
  while (col.offsets[r + 1] <= k) r++;
  return `row ${firstRow + r}`;
}

/** prompt_len within each row's tokens. */
function promptFault(values: ArrayLike<number>, tokens: Int32Array, firstRow: number): string | null {
  for (let i = 0; i < values.length; i++) {
    const n = tokens[i + 1] - tokens[i];
    if (values[i] > n) return `row ${firstRow + i} holds ${values[i]} but the row has ${n} tokens`;
  }
  return null;
}
