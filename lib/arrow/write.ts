/**
 * The stage-file writer: checks the columns against the kind's declaration, builds one record batch,
 * serializes it in the Arrow IPC file format (uncompressed), and replaces the file atomically before
 * writing its manifest.
 *
 * Crash safety: the new data and its manifest go to temporary files, synced; then the old pair is
 * renamed aside, the new pair renamed in (data first, manifest last) and the old pair deleted
 * (lib/fs/replace.ts). A kill at any point leaves one complete pair, the old one possibly under its
 * aside name until the next output check renames it back; a data file with a manifest beside it is
 * never a mismatched pair. Whether `path` may be replaced at all is `checkOutputPath`'s decision.
 *
 * Free space is checked before the temporary files are created (the bytes are known by then,
 * lib/fs/atomic.ts); a disk that fills anyway is a one-line DiskFullError naming `path`, the
 * temporary files removed and the previous pair intact (lib/fs/disk_space.ts).
 *
 * @module
 */

import { type Data, Field, makeData, RecordBatch, Schema, Struct, Table, tableToIPC } from "apache-arrow";
import { UserError } from "../errors.ts";
import { diskFullOr } from "../fs/disk_space.ts";
import { replaceFileWithManifest, replacementTag } from "../fs/replace.ts";
import { writeBytesAtomic } from "../fs/atomic.ts";
import { type ColumnInput, toData } from "./build.ts";
import {
  type ColumnDecl,
  findColumn,
  FORMAT_VERSION,
  type ResolvedKind,
  resolveKind,
  type StageKind,
} from "./kinds.ts";
import { manifestPath, writeManifest } from "./manifest.ts";
import { sha256Hex } from "../fs/sha256.ts";
import { encodeMetadata, type MetadataInput } from "./metadata.ts";

/** Room for the manifest (a few hundred bytes) and the file system's rounding, in a disk-full message. */
const MANIFEST_BYTES = 4096;

/** What a write produced. */
export interface WriteResult {
  rows: number;
  sha256: string;
  bytes: number;
}

/**
 * Writes a stage file of `kind` at `path` from `columns` (every declared column, plus any matching the
 * kind's patterns) and `metadata` (the keys the kind requires; kind, format_version, toolkit_version
 * and created_at are filled in). Bad columns or metadata throw a UserError naming the column or key.
 */
export async function writeStageFile(
  path: string,
  kind: StageKind,
  columns: Record<string, ColumnInput>,
  metadata: MetadataInput,
): Promise<WriteResult> {
  const table = buildTable(path, kind, columns, metadata);
  const bytes = tableToIPC(table, "file");
  const sha256 = await sha256Hex(bytes);
  const rows = table.numRows;
  const tmp = `${path}.tmp-${replacementTag()}`;
  try {
    await writeBytesAtomic(tmp, bytes);
    await writeManifest(tmp, {
      kind,
      format_version: FORMAT_VERSION,
      rows,
      sha256,
      bytes: bytes.length,
      written_at: new Date().toISOString(),
    });
    await replaceFileWithManifest(path, tmp, manifestPath(tmp));
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    await Deno.remove(manifestPath(tmp)).catch(() => {});
    throw diskFullOr(e, path, bytes.length + MANIFEST_BYTES);
  }
  return { rows, sha256, bytes: bytes.length };
}

/** Builds the checked, single-batch Arrow table of a stage file (exported for tests and notebooks). */
export function buildTable(
  path: string,
  kind: StageKind,
  columns: Record<string, ColumnInput>,
  metadata: MetadataInput,
): Table {
  const decl = resolveKind(kind);
  const order = columnOrder(path, decl, columns);
  const datas = order.map((c) => toData({ path, name: c.name, type: c.type }, columns[c.name]));
  const rows = checkRowCounts(path, order, datas);
  const fields = order.map((c, i) => new Field(c.name, datas[i].type, false));
  const schema = new Schema(fields, encodeMetadata(path, kind, metadata));
  const struct = makeData({ type: new Struct(fields), length: rows, nullCount: 0, children: datas });
  return new Table(schema, [new RecordBatch(schema, struct)]);
}

/** Declared columns in declaration order, then pattern columns sorted by name; refuses missing and unknown ones. */
function columnOrder(path: string, decl: ResolvedKind, columns: Record<string, ColumnInput>): ColumnDecl[] {
  for (const c of decl.allColumns) {
    if (columns[c.name] === undefined) {
      throw new UserError(`writing ${path}: column "${c.name}"`, {
        why: `it is missing; a ${decl.kind} file needs it (${c.doc}, owned by stage ${c.stage})`,
        fix: "supply every declared column (see lib/arrow/kinds.ts)",
      });
    }
  }
  const extra = Object.keys(columns).filter((n) => !decl.allColumns.some((c) => c.name === n)).sort();
  const dynamic = extra.map((name) => {
    const found = findColumn(decl, name);
    if (!found) {
      const shapes = decl.allPatterns.map((p) => p.shape);
      throw new UserError(`writing ${path}: column "${name}"`, {
        why: `it is not part of a ${decl.kind} file`,
        fix: shapes.length
          ? `remove it or name it ${shapes.join(" or ")}`
          : "remove it, or declare it in lib/arrow/kinds.ts",
      });
    }
    return found;
  });
  return [...decl.allColumns, ...dynamic];
}

function checkRowCounts(path: string, order: ColumnDecl[], datas: Data[]): number {
  const rows = datas.length ? datas[0].length : 0;
  datas.forEach((d, i) => {
    if (d.length !== rows) {
      throw new UserError(`writing ${path}: column "${order[i].name}"`, {
        why: `it has ${d.length} rows but column "${order[0].name}" has ${rows}`,
        fix: "give every column one value per row",
      });
    }
  });
  return rows;
}
