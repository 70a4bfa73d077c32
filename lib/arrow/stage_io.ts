/**
 * Stage functions take a table and return a table; the mains read and write files. These helpers
 * connect the two: wrap an in-memory table as a stage file, build a stage's output table from its
 * input plus its own columns, and write a table built that way.
 *
 * @module
 */

import type { Table } from "apache-arrow";
import { appendColumns, inheritMetadata } from "./append.ts";
import type { ColumnInput } from "./build.ts";
import type { StageKind } from "./kinds.ts";
import { decodeMetadata, type MetadataInput } from "./metadata.ts";
import { StageFile } from "./stage_file.ts";
import { buildTable, type WriteResult, writeStageFile } from "./write.ts";

/** Where an in-memory table "comes from" in error messages. */
export const IN_MEMORY = "(in-memory table)";

/** A stage file as given, or a table wrapped as one (its metadata decoded; sha256 unknown: ""). */
export function asStageFile(input: Table | StageFile, kind: StageKind): StageFile {
  if (input instanceof StageFile) return input;
  return new StageFile(IN_MEMORY, kind, input, decodeMetadata(IN_MEMORY, input.schema.metadata), "");
}

/** The `kind` table made of `input`'s columns plus `own`, with metadata inherited from `input`. */
export function outputTable(
  input: StageFile,
  kind: StageKind,
  own: Record<string, ColumnInput>,
  metadata: MetadataInput,
): Table {
  const columns = appendColumns(input, kind, own);
  return buildTable(IN_MEMORY, kind, columns, inheritMetadata(input, metadata));
}

/** Writes a table built by `outputTable` as a stage file (atomic, with its manifest). */
export function writeTable(path: string, kind: StageKind, table: Table): Promise<WriteResult> {
  const columns: Record<string, ColumnInput> = {};
  for (const field of table.schema.fields) columns[field.name] = table.getChild(field.name)!;
  const { kind: _k, format_version: _v, ...metadata } = decodeMetadata(path, table.schema.metadata);
  return writeStageFile(path, kind, columns, metadata);
}
