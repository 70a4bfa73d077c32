/**
 * The parent pid of another process, read from Linux's `/proc/PID/stat` through libc (`open`, `read`,
 * `close` over FFI, lib/libc.ts). Deno refuses `/proc` paths without `--allow-all`, which no task has; a
 * stage with `--allow-ffi` may call libc, and this reads one process's status line with it, nothing else.
 * Used by lifetime.ts to see `deno task` re-parented when npx, two processes above the stage, is killed.
 *
 * Null wherever it cannot tell: no libc (not Linux, no `--allow-ffi`, no glibc), no such process.
 *
 * @module
 */

import { cPath, O_RDONLY, openLibc } from "../libc.ts";

const STAT_BYTES = 1024;

/** The parent pid of process `pid`, or null where it cannot be read (see the module comment). */
export function parentPidOf(pid: number): number | null {
  const c = openLibc();
  if (!c) return null;
  const fd = c.open(cPath(`/proc/${pid}/stat`), O_RDONLY);
  if (fd < 0) return null;
  const buf = new Uint8Array(STAT_BYTES);
  const n = Number(c.read(fd, buf, BigInt(buf.length)));
  c.close(fd);
  return n > 0 ? parentFromStat(new TextDecoder().decode(buf.subarray(0, n))) : null;
}

/**
 * The ppid field of a `/proc/PID/stat` line: `pid (comm) state ppid …`, where comm may hold spaces and
 * parentheses, so the fields are counted from the last `)`.
 */
export function parentFromStat(line: string): number | null {
  const fields = line.slice(line.lastIndexOf(")") + 1).trim().split(/\s+/);
  const ppid = Number(fields[1]);
  return Number.isInteger(ppid) && ppid >= 0 ? ppid : null;
}
