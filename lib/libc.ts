/**
 * The C library over FFI, opened once for the few calls Deno has no API for: stderr redirection around
 * native calls (lib/ort/quiet.ts) and another process's parent pid from /proc (lib/cli/proc_parent.ts).
 * Null where it cannot be opened: not Linux, no `--allow-ffi`, or no glibc (`libc.so.6`, e.g. musl);
 * every caller then goes on without it.
 *
 * @module
 */

const SYMBOLS = {
  open: { parameters: ["buffer", "i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  close: { parameters: ["i32"], result: "i32" },
  dup: { parameters: ["i32"], result: "i32" },
  dup2: { parameters: ["i32", "i32"], result: "i32" },
} as const;

/** The symbols this project calls. */
export type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

/** Flags of `open` (Linux's values). */
export const O_RDONLY = 0;
export const O_WRONLY = 1;

let libc: Libc | null | undefined;

/** libc's symbols, opened on first use, or null (see the module comment). */
export function openLibc(): Libc | null {
  if (libc !== undefined) return libc;
  libc = null;
  if (Deno.build.os !== "linux") return libc;
  try {
    if (Deno.permissions.querySync({ name: "ffi" }).state !== "granted") return libc;
    libc = Deno.dlopen("libc.so.6", SYMBOLS).symbols;
  } catch {
    libc = null;
  }
  return libc;
}

/** A NUL-terminated path for libc. */
export function cPath(path: string): Uint8Array<ArrayBuffer> {
  return new TextEncoder().encode(`${path}\0`);
}
