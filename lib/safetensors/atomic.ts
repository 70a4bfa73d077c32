/**
 * Atomic file writes: write a temporary file beside the target, fsync it, rename it over the target.
 * A crash leaves the old file or the new one, never a torn one (plus, at worst, a stray `.tmp-*`).
 *
 * @module
 */

import { dirname } from "node:path";
import { checkFreeSpace, diskFullOr } from "../fs/disk_space.ts";

/**
 * Writes `path` atomically; `fill` writes the content into the open temporary file. With `bytes` (the
 * size `fill` will write) the free space is checked first; a full disk at any point is a DiskFullError
 * naming `path`, the temporary file removed.
 */
export async function writeFileAtomic(
  path: string,
  fill: (file: Deno.FsFile) => Promise<void>,
  bytes?: number,
): Promise<void> {
  if (bytes !== undefined) checkFreeSpace(path, bytes);
  const tmp = `${path}.tmp-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const file = await Deno.open(tmp, { write: true, create: true, truncate: true });
  try {
    await fill(file);
    await file.sync();
  } catch (e) {
    file.close();
    await Deno.remove(tmp).catch(() => {});
    throw diskFullOr(e, path, bytes ?? null);
  }
  file.close();
  await Deno.rename(tmp, path);
  await syncDir(dirname(path));
}

/** Writes a UTF-8 text file atomically. */
export function writeTextAtomic(path: string, text: string): Promise<void> {
  const bytes = new TextEncoder().encode(text);
  return writeFileAtomic(path, (file) => writeAll(file, bytes), bytes.length);
}

/** Writes every byte of `bytes` (a single `write` may write fewer). */
export async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  let done = 0;
  while (done < bytes.length) done += await file.write(bytes.subarray(done));
}

/** fsyncs a directory so the rename itself is durable; best effort (not every platform allows it). */
async function syncDir(dir: string): Promise<void> {
  try {
    const d = await Deno.open(dir, { read: true });
    try {
      await d.sync();
    } finally {
      d.close();
    }
  } catch {
    // Directories cannot be opened or synced on some platforms; the rename is still atomic there.
  }
}
