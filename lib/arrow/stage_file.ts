/**
 * A stage file as read: the Arrow table, its decoded metadata, and typed accessors. Numeric list
 * columns come back as one flat typed array plus offsets, zero-copy from the file's bytes.
 *
 * @module
 */

import { StructRow, type Table, Vector } from "apache-arrow";
import { UserError } from "../errors.ts";
import { type FlatList, flatOfVector } from "./columns.ts";
import type { StageKind } from "./kinds.ts";
import type { StageMetadata } from "./metadata.ts";
import { isNumericList, type NumericArray } from "./types.ts";

/** A checked stage file (see `readStageFile`). */
export class StageFile {
  #flat = new Map<string, FlatList>();

  constructor(
    /** The path it was read from. */
    readonly path: string,
    readonly kind: StageKind,
    readonly table: Table,
    readonly metadata: StageMetadata,
    /** sha256 of the file's bytes (record it in the next file's `input_hashes`). */
    readonly sha256: string,
  ) {}

  /** Number of rows. */
  get rows(): number {
    return this.table.numRows;
  }

  /** Column names in file order. */
  get columnNames(): string[] {
    return this.table.schema.fields.map((f) => f.name);
  }

  /** Whether the file has column `name`. */
  has(name: string): boolean {
    return this.table.getChild(name) !== null;
  }

  /** The Arrow vector of column `name`. */
  vector(name: string): Vector {
    const v = this.table.getChild(name);
    if (!v) throw this.#noColumn(name);
    return v;
  }

  /** A numeric list column as flat values plus offsets (zero-copy for files written by this toolkit). */
  listColumn<T extends NumericArray = NumericArray>(name: string): FlatList<T> {
    let flat = this.#flat.get(name);
    if (!flat) {
      flat = flatOfVector(this.vector(name));
      if (!flat) {
        throw new UserError(`stage file ${this.path}: column "${name}"`, {
          why: `it is ${this.vector(name).type}, not a list of numbers`,
          fix: "read it with column(name) instead",
        });
      }
      this.#flat.set(name, flat);
    }
    return flat as FlatList<T>;
  }

  /** Row `i` of a numeric list column, as a subarray (no copy). */
  listAt<T extends NumericArray = NumericArray>(name: string, i: number): T {
    return this.listColumn<T>(name).at(i);
  }

  /**
   * Column `name` as JS values: strings, numbers, booleans; typed arrays for numeric lists; arrays of
   * plain objects for struct lists (`tool_calls`).
   */
  column(name: string): unknown[] {
    const v = this.vector(name);
    if (isNumericList(v.type)) {
      const flat = this.listColumn(name);
      return Array.from({ length: flat.length }, (_, i) => flat.at(i));
    }
    return Array.from(v, toPlain);
  }

  /** Row `i` of a JSON text column, parsed. */
  json(name: string, i: number): unknown {
    const text = this.vector(name).get(i);
    try {
      return JSON.parse(String(text));
    } catch {
      throw new UserError(`stage file ${this.path}: column "${name}" row ${i}`, {
        value: text,
        why: "it is not valid JSON",
        fix: "re-run the stage that wrote the column",
      });
    }
  }

  #noColumn(name: string): UserError {
    return new UserError(`stage file ${this.path}: column "${name}"`, {
      why: "the file has no such column",
      fix: `use one of ${this.columnNames.join(", ")}`,
    });
  }
}

/** Arrow values to plain JS: nested vectors to arrays, struct rows to objects. */
function toPlain(value: unknown): unknown {
  if (value instanceof StructRow) return value.toJSON();
  if (value instanceof Vector) return Array.from(value, toPlain);
  return value;
}
