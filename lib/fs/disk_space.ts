/**
 * A full disk as one line. Writers check free space before they start where the size is known or can
 * be estimated (a stage file's bytes, a checkpoint's tensors, a rollout's episodes before sampling),
 * and the atomic writers turn the operating system's "no space left on device" (ENOSPC; also a full
 * quota, EDQUOT) into a {@link DiskFullError} naming the output, the bytes needed and the bytes free,
 * after removing their temporary files. The previous output is never touched before the new one is
 * complete, so it stays intact.
 *
 * Free space comes from `statfs` (node:fs), which needs `--allow-sys` (`--allow-sys=statfs` is enough);
 * without that permission it is unknown, the check before writing passes, and a write that fails still
 * gives the one-line error.
 *
 * @module
 */

import { statfsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { UserError } from "../errors.ts";

/**
 * The disk cannot hold an output: an infrastructure fault the user fixes by freeing space. A UserError
 * so that every command prints it as one line and exits 2.
 */
export class DiskFullError extends UserError {
  constructor(
    /** The output being written. */
    readonly path: string,
    /** Bytes the write needs (an estimate before sampling), or null when unknown. */
    readonly needed: number | null,
    /** Bytes free on that disk, or null when unknown. */
    readonly free: number | null,
  ) {
    super(`writing ${path}`, {
      why: `not enough disk space: it needs ${sizeText(needed)} and ${sizeText(free)} is free there; ` +
        "nothing was replaced and temporary files were removed, so any previous output is intact",
      fix: "free disk space (or write the output to another disk) and run the command again",
    });
    this.name = "DiskFullError";
  }
}

/** "12.3 MB (12345678 bytes)", or "an unknown amount". */
export function sizeText(bytes: number | null): string {
  if (bytes === null) return "an unknown amount";
  const units = ["bytes", "KB", "MB", "GB", "TB"];
  let v = bytes;
  let u = 0;
  while (v >= 1000 && u < units.length - 1) [v, u] = [v / 1000, u + 1];
  return u === 0 ? `${bytes} bytes` : `${v.toFixed(1)} ${units[u]} (${bytes} bytes)`;
}

/** Whether `e` is the operating system saying the disk (or the user's quota) is full. */
export function isDiskFull(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const code = (e as { code?: unknown }).code;
  if (code === "ENOSPC" || code === "EDQUOT") return true;
  return /No space left on device|os error 28\b|Disk quota exceeded|os error 122\b/i.test(e.message);
}

/**
 * Free bytes for this user on the disk that holds `path` (or its nearest existing ancestor), or null
 * when unknown (no `sys` permission for statfs, or a platform without it).
 */
export function freeBytes(path: string): number | null {
  if (!mayStatfs()) return null;
  let at = resolve(path);
  for (;;) {
    try {
      const s = statfsSync(at);
      return Number(s.bavail) * Number((s as { frsize?: number }).frsize ?? s.bsize);
    } catch (e) {
      const parent = dirname(at);
      if (!(e instanceof Deno.errors.NotFound) && (e as { code?: string }).code !== "ENOENT") return null;
      if (parent === at) return null;
      at = parent;
    }
  }
}

function mayStatfs(): boolean {
  try {
    return Deno.permissions.querySync({ name: "sys", kind: "statfs" }).state === "granted";
  } catch {
    return false;
  }
}

/** Throws a DiskFullError before any write when the disk holding `path` has less than `needed` free. */
export function checkFreeSpace(path: string, needed: number): void {
  const free = freeBytes(path);
  if (free !== null && free < needed) throw new DiskFullError(path, Math.ceil(needed), free);
}

/**
 * `e` as the error to throw for a failed write of `path` needing `needed` bytes: a DiskFullError when
 * the disk is full (one raised for an inner temporary file is renamed to `path`), `e` itself otherwise.
 */
export function diskFullOr(e: unknown, path: string, needed: number | null): unknown {
  if (e instanceof DiskFullError) {
    return new DiskFullError(path, needed ?? e.needed, e.free ?? freeBytes(path));
  }
  return isDiskFull(e) ? new DiskFullError(path, needed, freeBytes(path)) : e;
}
