/**
 * Writing a directory as a unit: its files are written into a temporary sibling, the marker file
 * `.deno-rl-output.json` last (lib/fs/output.ts), and the sibling then replaces the target by renames
 * (lib/fs/replace.ts: old aside, new in, old deleted). A crash while filling leaves the old directory
 * untouched (plus a stray `.tmp-*` sibling); a crash during the replacement leaves one complete
 * directory, the old one under an aside name that the next output check renames back.
 *
 * Whether the target may be replaced at all is decided before any work by `checkOutputPath`.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { checkFreeSpace, DiskFullError, diskFullOr, isDiskFull } from "./disk_space.ts";
import { type OutputDirKind, writeOutputMarker } from "./output.ts";
import { replaceDir, replacementTag } from "./replace.ts";

export interface DirWriteOptions {
  /** The kind the marker names (default "dir": a directory output of no declared kind). */
  kind?: OutputDirKind | "dir";
  /** The command the marker names as the maker (see `writeOutputMarker`). */
  by?: string;
  /** The bytes `fill` will write, when known: the free space is checked before anything is written. */
  bytes?: number;
}

/**
 * Creates or replaces `dir` with what `fill` writes into the (empty, existing) folder it is given. A
 * full disk (before, with `opts.bytes`, or while filling) is a one-line DiskFullError naming `dir`;
 * the temporary folder is removed and the previous directory is untouched.
 */
export async function writeDirAtomic(
  dir: string,
  fill: (tmp: string) => Promise<void>,
  opts: DirWriteOptions = {},
): Promise<void> {
  if (opts.bytes !== undefined) checkFreeSpace(dir, opts.bytes);
  const tmp = join(dirname(dir), `.${basename(dir)}.tmp-${replacementTag()}`);
  await Deno.mkdir(tmp, { recursive: true });
  try {
    await fill(tmp);
    await writeOutputMarker(tmp, opts.kind ?? "dir", opts.by);
    await replaceDir(tmp, dir);
  } catch (e) {
    const needed = opts.bytes ?? await bytesNeeded(e, tmp);
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw diskFullOr(e, dir, needed);
  }
}

/** For a full disk without a known size: what was written so far plus what the failed write needed. */
async function bytesNeeded(e: unknown, tmp: string): Promise<number | null> {
  if (!(e instanceof DiskFullError) && !isDiskFull(e)) return null;
  const inner = e instanceof DiskFullError ? e.needed : null;
  return inner === null ? null : inner + await treeBytes(tmp);
}

/** Bytes of the files under `dir` (best effort). */
async function treeBytes(dir: string): Promise<number> {
  let total = 0;
  try {
    for await (const entry of Deno.readDir(dir)) {
      const path = join(dir, entry.name);
      total += entry.isDirectory ? await treeBytes(path) : (await Deno.lstat(path)).size;
    }
  } catch {
    // a directory that vanished or cannot be read counts as empty
  }
  return total;
}
