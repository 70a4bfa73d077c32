/**
 * Typed access to a record's fields. Each helper throws a `UserError` naming the file, the line or row,
 * and the field, so loaders never pass on a half-read task and never skip a bad one.
 */
import { UserError } from "../errors.ts";
import type { Row } from "./rows.ts";

/** A field that must be a non-empty string. */
export function stringField(row: Row, field: string): string {
  const value = row.values[field];
  if (typeof value === "string" && value.trim() !== "") return value;
  throw fieldError(row, field, value, "a non-empty string");
}

/** A field that may be absent or null (→ `undefined`) but, when present, must be a string. */
export function optionalStringField(row: Row, field: string): string | undefined {
  const value = row.values[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") return value;
  throw fieldError(row, field, value, "a string (or absent)");
}

/** A field that must be a list of strings (a JSON array or a Parquet list column). */
export function stringListField(row: Row, field: string): string[] {
  const value = row.values[field];
  if (Array.isArray(value) && value.every((item) => typeof item === "string")) return value;
  throw fieldError(row, field, value, "a list of strings");
}

/** Like `stringListField`, but absent or null gives `[]`. */
export function optionalStringListField(row: Row, field: string): string[] {
  const value = row.values[field];
  return value === undefined || value === null ? [] : stringListField(row, field);
}

/**
 * A field holding a scalar written as a string: strings pass as they are, numbers and bigints (Parquet
 * INT64) are printed. Used for ids and answers, which datasets store either way.
 */
export function scalarField(row: Row, field: string): string {
  const value = row.values[field];
  if (typeof value === "string" && value.trim() !== "") return value;
  if (typeof value === "bigint" || (typeof value === "number" && Number.isFinite(value))) {
    return String(value);
  }
  throw fieldError(row, field, value, "a non-empty string or a number");
}

function fieldError(row: Row, field: string, value: unknown, expected: string): UserError {
  const missing = !(field in row.values);
  return new UserError(`${row.where}: field "${field}"`, {
    ...(missing ? {} : { value }),
    why: missing ? `the field is missing (the record has ${listKeys(row.values)})` : `expected ${expected}`,
    fix: missing
      ? "check that the file matches the chosen data.source, or map the field names with data.fields"
      : `write "${field}" as ${expected}`,
  });
}

function listKeys(values: Record<string, unknown>): string {
  const keys = Object.keys(values);
  return keys.length === 0 ? "no fields" : `fields ${keys.map((k) => JSON.stringify(k)).join(", ")}`;
}
