/**
 * Reads a dataset file into plain records, each tagged with where it came from so that every later
 * error can name the file and the line or row.
 *
 * Formats, chosen by extension:
 * - `.jsonl`: one JSON object per line; blank lines are allowed (a trailing newline is common), any
 *   other line that is not a JSON object is an error naming `file:line`.
 * - `.json`: a JSON array of objects when the file starts with `[`, otherwise JSON Lines (Hugging Face
 *   often ships JSON Lines under a `.json` name).
 * - `.parquet`: read whole through hyparquet (`parquetReadObjects`); rows are named `file row N` with N
 *   counted from 0, as pandas and polars count them. Snappy-compressed files (the Hugging Face
 *   default) are supported; other codecs need hyparquet's optional compressors.
 */
import { parquetReadObjects } from "hyparquet";
import { UserError } from "../errors.ts";
import { readInputFile } from "../fs/input.ts";

/** One record of a dataset file. */
export interface Row {
  /** The record's fields as parsed (Parquet INT64 columns arrive as `bigint`). */
  values: Record<string, unknown>;
  /** Position among the file's records, from 0; loaders derive stable task ids from it. */
  index: number;
  /** `file:line` (JSON Lines) or `file row N` (JSON array, Parquet), for error messages. */
  where: string;
}

const FORMATS = [".jsonl", ".json", ".parquet"] as const;

/** Reads every record of `path` (`.jsonl`, `.json` or `.parquet`). Never skips a bad record: it throws. */
export async function readRows(path: string): Promise<Row[]> {
  const ext = FORMATS.find((e) => path.toLowerCase().endsWith(e));
  if (ext === undefined) {
    throw new UserError(`dataset file ${path}`, {
      why: `its extension is not one of ${FORMATS.join(", ")}`,
      fix: "convert it to JSON Lines or Parquet, or rename it to the extension that matches its content",
    });
  }
  const bytes = await readBytes(path);
  if (ext === ".parquet") return await parquetRows(path, bytes);
  const text = new TextDecoder().decode(bytes);
  return ext === ".json" && text.trimStart().startsWith("[")
    ? jsonArrayRows(path, text)
    : jsonlRows(path, text);
}

/**
 * The largest dataset file read: the file is held whole in memory and decoded to one string, and V8's
 * strings end near 512 Mi characters (a 1 GB JSON Lines file failed with "Invalid string length").
 */
export const MAX_DATASET_BYTES = 256 * 2 ** 20;

async function readBytes(path: string): Promise<Uint8Array> {
  return await readInputFile(path, {
    what: `dataset file ${path}`,
    expect: "a dataset file",
    missingFix: "check data.path (relative paths are resolved from the working directory)",
    fix: "set data.path to a regular .jsonl, .json or .parquet file (split a larger one, or take a sample)",
    maxBytes: MAX_DATASET_BYTES,
  });
}

/** Parses JSON Lines; line numbers count from 1, as editors do. */
export function jsonlRows(path: string, text: string): Row[] {
  const rows: Row[] = [];
  const lines = text.split("\n");
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() === "") continue;
    const where = `${path}:${i + 1}`;
    rows.push({ values: parseObject(lines[i], where), index: rows.length, where });
  }
  return rows;
}

function parseObject(line: string, where: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (err) {
    throw new UserError(where, {
      value: line,
      why: `the line is not valid JSON (${(err as Error).message})`,
      fix: "write one complete JSON object per line (JSON Lines)",
    });
  }
  return asRecord(value, where, "each line must hold one JSON object");
}

function jsonArrayRows(path: string, text: string): Row[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UserError(`dataset file ${path}`, {
      why: `it starts with "[" but is not valid JSON (${(err as Error).message})`,
      fix: "repair the JSON array, or write the file as JSON Lines (.jsonl)",
    });
  }
  return (value as unknown[]).map((item, index) => {
    const where = `${path} row ${index}`;
    return { values: asRecord(item, where, "each array item must be a JSON object"), index, where };
  });
}

function asRecord(value: unknown, where: string, fix: string): Record<string, unknown> {
  if (typeof value === "object" && value !== null && !Array.isArray(value)) {
    return value as Record<string, unknown>;
  }
  throw new UserError(where, { value, why: "the record is not a JSON object", fix });
}

async function parquetRows(path: string, bytes: Uint8Array): Promise<Row[]> {
  // hyparquet reads from an ArrayBuffer-like "AsyncBuffer"; copy out exactly this file's bytes.
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  let records: Record<string, unknown>[];
  try {
    records = await parquetReadObjects({ file: buffer });
  } catch (err) {
    throw new UserError(`dataset file ${path}`, {
      why: `it could not be read as Parquet (${(err as Error).message})`,
      fix: "check that the file is a complete Parquet file (re-download it), or use JSON Lines",
    });
  }
  return records.map((values, index) => ({ values, index, where: `${path} row ${index}` }));
}
