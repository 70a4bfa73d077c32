/**
 * The one atomic file writer: write `path.tmp-<pid>-<rand>` in the same directory, fsync it, rename it
 * over `path`, fsync the directory. A crash leaves the old file or the new one, never a torn one (at
 * worst a stray `.tmp-*` file beside it). Stage files, manifests, safetensors, the run's pointers and
 * the report all go through here; whole directories through atomic_dir.ts.
 *
 * Free space: with the size known beforehand it is checked before the temporary file is created; a disk
 * that fills anyway is a one-line DiskFullError naming `path` (disk_space.ts), the temporary file
 * removed and the previous file untouched.
 *
 * @module
 */

import { dirname } from "node:path";
import { checkFreeSpace, diskFullOr } from "./disk_space.ts";

/** Writes are issued in chunks this large (a single `write` call may also write fewer bytes). */
const CHUNK = 8 << 20;

export interface AtomicOptions {
  /** The bytes `fill` will write, when known: the free space is checked before anything is written. */
  bytes?: number;
  /** Runs after the temporary file is complete and synced, just before the rename. */
  beforeRename?: () => Promise<void>;
}

/** Replaces `path` atomically with what `fill` writes into the open temporary file. */
export async function writeFileAtomic(
  path: string,
  fill: (file: Deno.FsFile) => Promise<void>,
  opts: AtomicOptions = {},
): Promise<void> {
  if (opts.bytes !== undefined) checkFreeSpace(path, opts.bytes);
  const tmp = `${path}.tmp-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    await fill(file);
    await file.sync();
  } catch (e) {
    file.close();
    await Deno.remove(tmp).catch(() => {});
    throw diskFullOr(e, path, opts.bytes ?? null);
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

/** Replaces `path` with `bytes` atomically. */
export function writeBytesAtomic(path: string, bytes: Uint8Array, opts: AtomicOptions = {}): Promise<void> {
  return writeFileAtomic(path, (file) => writeAll(file, bytes), { ...opts, bytes: bytes.length });
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

/** Writes every byte of `bytes` (a single `write` may write fewer). */
export async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
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
