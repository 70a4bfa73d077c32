/**
 * The manifest beside every stage file (`<file>.manifest.json`): kind, format version, row count,
 * byte size and sha256 of the data file. It is written after the data file, so a file without a
 * manifest was not completely written; its size, hash and row count catch truncation and corruption
 * that the Arrow reader alone would miss (a flipped byte is never detected by Arrow JS).
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { writeTextAtomic } from "../fs/atomic.ts";

/** The manifest of a stage file. */
export interface Manifest {
  kind: string;
  format_version: number;
  rows: number;
  sha256: string;
  bytes: number;
  written_at: string;
}

/** The manifest path of a stage file. */
export function manifestPath(path: string): string {
  return `${path}.manifest.json`;
}

/** Writes the manifest of `path` atomically. */
export function writeManifest(path: string, manifest: Manifest): Promise<void> {
  return writeTextAtomic(manifestPath(path), JSON.stringify(manifest, null, 2) + "\n");
}

/**
 * Reads the manifest of `path`. A missing manifest means the writer stopped before finishing (or
 * another tool wrote the file); `fix` says how to rewrite it.
 */
export async function readManifest(path: string, fix: string): Promise<Manifest> {
  const mpath = manifestPath(path);
  let text: string;
  try {
    text = await Deno.readTextFile(mpath);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new UserError(`stage file ${path}`, {
      why: `its manifest ${mpath} is missing, so the file was not completely written ` +
        "(the writer stopped before finishing) or another tool wrote it",
      fix: `${fix}, or read it with { requireManifest: false } if another tool wrote it`,
    });
  }
  const m = parseManifest(text);
  if (!m) {
    throw new UserError(`manifest ${mpath}`, {
      why: "it is not a valid manifest (JSON with kind, format_version, rows, sha256, bytes)",
      fix,
    });
  }
  return m;
}

function parseManifest(text: string): Manifest | undefined {
  let m: Record<string, unknown>;
  try {
    m = JSON.parse(text);
  } catch {
    return undefined;
  }
  const ok = m !== null && typeof m === "object" && typeof m.kind === "string" &&
    Number.isInteger(m.format_version) && Number.isInteger(m.rows) && Number.isInteger(m.bytes) &&
    typeof m.sha256 === "string";
  return ok ? m as unknown as Manifest : undefined;
}
