/**
 * Atomic file replacement: write `path.tmp-<pid>-<rand>` in the same directory, fsync it, rename it
 * over `path`, fsync the directory. A crash leaves the old file or the new one, never a torn one
 * (at worst a stray `.tmp-*` file beside it).
 *
 * @module
 */

import { dirname } from "node:path";
import { checkFreeSpace, diskFullOr } from "../fs/disk_space.ts";

/** Writes are issued in chunks this large (a single `write` call may also write fewer bytes). */
const CHUNK = 8 << 20;

export interface AtomicOptions {
  /** Runs after the temporary file is complete and synced, just before the rename. */
  beforeRename?: () => Promise<void>;
}

/** Replaces `path` with `bytes` atomically. */
export async function writeBytesAtomic(
  path: string,
  bytes: Uint8Array,
  opts: AtomicOptions = {},
): Promise<void> {
  checkFreeSpace(path, bytes.length);
  const tmp = `${path}.tmp-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    await writeAll(file, bytes);
    await file.sync();
  } catch (e) {
    file.close();
    await Deno.remove(tmp).catch(() => {});
    throw diskFullOr(e, path, bytes.length);
  }
  file.close();
  try {
    await opts.beforeRename?.();
    await Deno.rename(tmp, path);
  } catch (e) {
    await Deno.remove(tmp).catch(() => {});
    throw e;
  }
  await syncDir(dirname(path));
}

/** Replaces `path` with UTF-8 `text` atomically. */
export function writeTextAtomic(path: string, text: string): Promise<void> {
  return writeBytesAtomic(path, new TextEncoder().encode(text));
}

/** Removes `path` if it exists (durably: the directory is synced). */
export async function removeIfExists(path: string): Promise<void> {
  try {
    await Deno.remove(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  await syncDir(dirname(path));
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) {
    done += await file.write(bytes.subarray(done, Math.min(bytes.length, done + CHUNK)));
  }
}

/** fsyncs a directory so a rename or removal is durable; best effort (not every platform allows it). */
async function syncDir(dir: string): Promise<void> {
  try {
    const d = await Deno.open(dir, { read: true });
    try {
      await d.sync();
    } finally {
      d.close();
    }
  } catch {
    // Some platforms cannot open or sync directories; the rename is still atomic there.
  }
}
