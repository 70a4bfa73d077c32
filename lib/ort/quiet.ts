/**
 * Runs a synchronous call with the process's stderr (file descriptor 2) pointed at /dev/null, for calls
 * into native code that prints its own diagnostics there: a provider that fails to start prints the
 * Vulkan loader's and Dawn's warnings, and a one-line error should be the only line the user sees
 * (provider_check.ts says what failed). Through libc's dup/dup2 by FFI (lib/libc.ts); where libc cannot be
 * opened the call runs as is.
 *
 * @module
 */

import { cPath, O_WRONLY, openLibc } from "../libc.ts";

/** `call()` with native writes to stderr discarded; JS errors pass through unchanged. */
export function withStderrSilenced<T>(call: () => T): T {
  const c = openLibc();
  const saved = c ? c.dup(2) : -1;
  const sink = saved >= 0 ? c!.open(cPath("/dev/null"), O_WRONLY) : -1;
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
