/**
 * The stage-file reader. Checks, in order, each failure a UserError naming the file and the fix:
 * the file exists; its manifest exists; size, sha256 and row count match the manifest; the Arrow magic
 * bytes; the metadata's counts and positions fit the file (ipc_bounds.ts, so the parse is bounded);
 * the Arrow file parses; `kind` and `format_version` match; every declared column is present with its
 * declared type; every declared column's body is valid (validate.ts: offsets, lengths, nulls, UTF-8,
 * value rules, one entry per token). The work is linear in the file size. Extra columns that the kind does not declare are kept in the table but are
 * not carried into the next stage's file (see `appendColumns`).
 *
 * @module
 */

import { type Table, tableFromIPC } from "apache-arrow";
import { UserError } from "../errors.ts";
import { findColumn, FORMAT_VERSION, KINDS, rerunHint, resolveKind, type StageKind } from "./kinds.ts";
import { type Manifest, readManifest } from "./manifest.ts";
import { sha256Hex } from "../fs/sha256.ts";
import { decodeMetadata } from "./metadata.ts";
import { StageFile } from "./stage_file.ts";
import { sameType, typeName } from "./types.ts";
import { checkIpcBounds, OutOfBounds } from "./ipc_bounds.ts";
import { validateBodies } from "./validate.ts";

export interface ReadOptions {
  /** Check the manifest (default true). Turn off only for files written by other tools. */
  requireManifest?: boolean;
}

const MAGIC = new TextEncoder().encode("ARROW1");

/** Reads and checks a stage file of `kind`. */
export async function readStageFile(
  path: string,
  kind: StageKind,
  opts: ReadOptions = {},
): Promise<StageFile> {
  const fix = `${rerunHint(KINDS[kind].stage)} to rewrite ${path}`;
  const bytes = await readBytes(path, kind);
  const manifest = opts.requireManifest === false ? undefined : await readManifest(path, fix);
  const sha256 = await sha256Hex(bytes);
  if (manifest) checkAgainstManifest(path, bytes, sha256, manifest, fix);
  checkMagic(path, bytes, fix);
  checkStructure(path, bytes, fix);
  const table = parse(path, bytes, fix);
  if (manifest && table.numRows !== manifest.rows) {
    throw corrupted(path, "row count", `${table.numRows} rows, manifest says ${manifest.rows}`, fix);
  }
  const metadata = decodeMetadata(path, table.schema.metadata);
  checkKindAndVersion(path, kind, metadata.kind, metadata.format_version);
  checkColumns(path, kind, table);
  validateBodies(path, kind, table);
  return new StageFile(path, kind, table, metadata, sha256);
}

async function readBytes(path: string, kind: StageKind): Promise<Uint8Array> {
  try {
    return await Deno.readFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound) && !(e instanceof Deno.errors.IsADirectory)) throw e;
    const exists = !(e instanceof Deno.errors.NotFound);
    throw new UserError(`stage file ${path}`, {
      why: exists ? "it is a directory, not a file" : "it does not exist",
      fix: `check the path, or run stage ${KINDS[kind].stage} first (deno task ${KINDS[kind].stage}) ` +
        `to write the ${kind} file (${KINDS[kind].fileName})`,
    });
  }
}

function checkAgainstManifest(
  path: string,
  bytes: Uint8Array,
  sha256: string,
  m: Manifest,
  fix: string,
): void {
  if (bytes.length !== m.bytes) {
    throw corrupted(path, "size", `${bytes.length} bytes on disk, manifest says ${m.bytes}`, fix);
  }
  if (sha256 !== m.sha256) {
    throw corrupted(
      path,
      "sha256",
      `${sha256.slice(0, 12)}… on disk, manifest says ${m.sha256.slice(0, 12)}…`,
      fix,
    );
  }
}

function checkMagic(path: string, bytes: Uint8Array, fix: string): void {
  const n = MAGIC.length;
  const ok = bytes.length >= 2 * n + 4 &&
    MAGIC.every((b, i) => bytes[i] === b && bytes[bytes.length - n + i] === b);
  if (!ok) throw corrupted(path, "magic bytes", "no ARROW1 at start and end: not an Arrow IPC file", fix);
}

/** The metadata's counts and positions fit the file, so Arrow JS's parse is bounded (ipc_bounds.ts). */
function checkStructure(path: string, bytes: Uint8Array, fix: string): void {
  try {
    checkIpcBounds(bytes);
  } catch (e) {
    if (!(e instanceof OutOfBounds)) throw e;
    throw corrupted(path, "Arrow structure", e.message, fix);
  }
}

function parse(path: string, bytes: Uint8Array, fix: string): Table {
  try {
    return tableFromIPC(bytes);
  } catch (e) {
    // Arrow JS throws raw TypeErrors on malformed input; turn any of them into one clear message.
    throw corrupted(path, "Arrow parse", e instanceof Error ? e.message : String(e), fix);
  }
}

function checkKindAndVersion(path: string, kind: StageKind, actual: StageKind, version: number): void {
  if (actual !== kind) {
    throw new UserError(`stage file ${path}`, {
      value: actual,
      why: `expected a "${kind}" file but it is a "${actual}" file`,
      fix: `pass the ${kind} file written by stage ${KINDS[kind].stage} (${KINDS[kind].fileName})`,
    });
  }
  if (version !== FORMAT_VERSION) {
    throw new UserError(`stage file ${path}`, {
      value: version,
      why: `its format_version is ${version} but this toolkit reads format_version ${FORMAT_VERSION}`,
      fix: `${
        rerunHint(KINDS[kind].stage)
      } with this toolkit to rewrite it, or use the toolkit version that wrote it`,
    });
  }
}

function checkColumns(path: string, kind: StageKind, table: Table): void {
  const decl = resolveKind(kind);
  for (const c of decl.allColumns) {
    const fields = table.schema.fields.filter((f) => f.name === c.name);
    const field = fields[0];
    const fix = `${rerunHint(c.stage)} to rewrite it`;
    if (fields.length > 1) {
      // A stage reads the first, the value checks saw the last: one name, one column.
      throw new UserError(`stage file ${path}: column "${c.name}"`, {
        why: `the file has ${fields.length} columns of that name`,
        fix,
      });
    }
    if (!field) {
      throw new UserError(`stage file ${path}: column "${c.name}"`, {
        why: `it is missing (expected ${typeName(c.type)}: ${c.doc})`,
        fix,
      });
    }
    if (!sameType(field.type, c.type)) {
      throw new UserError(`stage file ${path}: column "${c.name}"`, {
        why: `expected type ${typeName(c.type)}, actual ${typeName(field.type)}`,
        fix,
      });
    }
  }
  for (const field of table.schema.fields) {
    const p = findColumn(decl, field.name);
    if (p && !sameType(field.type, p.type)) {
      throw new UserError(`stage file ${path}: column "${field.name}"`, {
        why: `expected type ${typeName(p.type)}, actual ${typeName(field.type)}`,
        fix: `${rerunHint(p.stage)} to rewrite it`,
      });
    }
  }
}

/** "stage file X: it is truncated or corrupted (size check failed: …)". */
function corrupted(path: string, check: string, detail: string, fix: string): UserError {
  return new UserError(`stage file ${path}`, {
    why: `it is truncated or corrupted (${check} check failed: ${detail})`,
    fix,
  });
}
