/**
 * Runs a synchronous call with the process's stderr (file descriptor 2) pointed at /dev/null, for calls
 * into native code that prints its own diagnostics there: a provider that fails to start prints the
 * Vulkan loader's and Dawn's warnings, and a one-line error should be the only line the user sees
 * (provider_check.ts says what failed). Through libc's dup/dup2 by FFI; where libc cannot be opened the
 * call runs as is.
 *
 * @module
 */

const O_WRONLY = 1;

interface Libc {
  dup(fd: number): number;
  dup2(from: number, to: number): number;
  open(path: Uint8Array<ArrayBuffer>, flags: number): number;
  close(fd: number): number;
}

let libc: Libc | null | undefined;

function openLibc(): Libc | null {
  if (libc !== undefined) return libc;
  try {
    const lib = Deno.dlopen("libc.so.6", {
      dup: { parameters: ["i32"], result: "i32" },
      dup2: { parameters: ["i32", "i32"], result: "i32" },
      open: { parameters: ["buffer", "i32"], result: "i32" },
      close: { parameters: ["i32"], result: "i32" },
    });
    libc = lib.symbols;
  } catch {
    libc = null;
  }
  return libc;
}

/** `call()` with native writes to stderr discarded; JS errors pass through unchanged. */
export function withStderrSilenced<T>(call: () => T): T {
  const c = openLibc();
  const saved = c ? c.dup(2) : -1;
  const sink = saved >= 0 ? c!.open(new TextEncoder().encode("/dev/null\0"), O_WRONLY) : -1;
  if (sink < 0) {
    if (saved >= 0) c!.close(saved);
    return call();
  }
  c!.dup2(sink, 2);
  c!.close(sink);
  try {
    return call();
  } finally {
    c!.dup2(saved, 2);
    c!.close(saved);
  }
}
