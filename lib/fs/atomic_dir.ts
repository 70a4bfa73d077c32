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
import { UserError } from "../errors.ts";
import { type OutputDirKind, writeOutputMarker } from "./output.ts";
import { replaceDir, replacementTag } from "./replace.ts";

export interface DirWriteOptions {
  /** The kind the marker names (default "dir": a directory output of no declared kind). */
  kind?: OutputDirKind | "dir";
  /** The command the marker names as the maker (see `writeOutputMarker`). */
  by?: string;
}

/** Creates or replaces `dir` with what `fill` writes into the (empty, existing) folder it is given. */
export async function writeDirAtomic(
  dir: string,
  fill: (tmp: string) => Promise<void>,
  opts: DirWriteOptions = {},
): Promise<void> {
  const tmp = join(dirname(dir), `.${basename(dir)}.tmp-${replacementTag()}`);
  await Deno.mkdir(tmp, { recursive: true });
  try {
    await fill(tmp);
    await writeOutputMarker(tmp, opts.kind ?? "dir", opts.by);
    await replaceDir(tmp, dir);
  } catch (e) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw diskFull(e, dir) ?? e;
  }
}

/** A UserError for a full disk (the earlier content is untouched), or undefined for other errors. */
function diskFull(e: unknown, dir: string): UserError | undefined {
  if (!(e instanceof Error) || !/os error 28|No space left/i.test(e.message)) return undefined;
  return new UserError(`writing ${dir}`, {
    why: "the disk is full; nothing was replaced, the previous content is intact",
    fix: "free disk space and run the stage again",
  });
}
