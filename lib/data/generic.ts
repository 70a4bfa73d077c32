/**
 * Any JSON Lines / Parquet file with a prompt column, read through a field mapping
 * (`data.fields` in config.yaml): which field holds the prompt, and optionally the id and the answer.
 *
 * Without an id field, ids are `{file stem}-{row}` with the row counted from 0. Answers stored as
 * numbers are printed as strings (`42`, not `42.0`). Every other field is kept in `meta`.
 */
import { scalarField, stringField } from "./fields.ts";
import { readRows, type Row } from "./rows.ts";
import type { Task } from "./task.ts";

/** Which record fields hold the prompt, and optionally the id and the answer. */
export interface FieldMap {
  /** Field holding a unique id; when absent, ids come from the file name and the row. */
  id?: string | null;
  /** Field holding the user message. */
  prompt: string;
  /** Field holding the canonical final answer (string or number). */
  answer?: string | null;
}

/** Options for `loadGeneric`. */
export interface GenericOptions {
  fields: FieldMap;
}

/** Loads a JSON Lines or Parquet file through `options.fields`. Throws a `UserError` on a bad record. */
export async function loadGeneric(path: string, options: GenericOptions): Promise<Task[]> {
  const stem = fileStem(path);
  return (await readRows(path)).map((row) => genericTask(row, options.fields, stem));
}

/** One record → a task, through `fields`. */
export function genericTask(row: Row, fields: FieldMap, stem: string): Task {
  const task: Task = {
    id: fields.id ? scalarField(row, fields.id) : `${stem}-${row.index}`,
    source: "generic",
    prompt: stringField(row, fields.prompt),
    meta: rest(row, fields),
  };
  if (fields.answer) task.answer = scalarField(row, fields.answer);
  return task;
}

/** The record's unmapped fields, JSON-safe (bigints become strings). */
function rest(row: Row, fields: FieldMap): Record<string, unknown> {
  const mapped = new Set([fields.id, fields.prompt, fields.answer]);
  const meta: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(row.values)) {
    if (!mapped.has(key)) meta[key] = typeof value === "bigint" ? String(value) : value;
  }
  return meta;
}

/** `data/train.part-1.jsonl` → `train.part-1`. */
function fileStem(path: string): string {
  const base = path.split(/[\\/]/).pop() ?? path;
  return base.replace(/\.(jsonl|json|parquet)$/i, "");
}
