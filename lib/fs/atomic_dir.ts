/**
 * Writing a directory as a unit: its files are written into a temporary sibling, which then replaces
 * the target by rename. A crash while filling leaves the old directory untouched (plus a stray
 * `.tmp-*` sibling). Replacing an existing directory takes two renames (old aside, new in); a crash
 * between them leaves the old content under `<dir>.old-*`, never a mix of old and new files.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { UserError } from "../errors.ts";

/** Creates or replaces `dir` with what `fill` writes into the (empty, existing) folder it is given. */
export async function writeDirAtomic(dir: string, fill: (tmp: string) => Promise<void>): Promise<void> {
  const tag = `${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const tmp = join(dirname(dir), `.${basename(dir)}.tmp-${tag}`);
  await Deno.mkdir(tmp, { recursive: true });
  try {
    await fill(tmp);
    const old = join(dirname(dir), `.${basename(dir)}.old-${tag}`);
    const moved = await renameIfExists(dir, old);
    await Deno.rename(tmp, dir);
    if (moved) await Deno.remove(old, { recursive: true });
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

async function renameIfExists(from: string, to: string): Promise<boolean> {
  try {
    await Deno.rename(from, to);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}
