/**
 * One way to look at a path a command was given, so that what the operating system or Deno's
 * permissions refuse becomes a one-line UserError naming the path, never a stack trace:
 *
 * - a path under `/proc`, `/sys` or `/dev/…/` that Deno will not touch without `--allow-all`
 *   (`NotCapable`; the `deno task` commands run with narrower permissions);
 * - a symlink loop (`ELOOP`);
 * - a name longer than the file system allows (`ENAMETOOLONG`, NAME_MAX is 255 bytes on Linux).
 *
 * A missing path (or one whose parent is a file) is `null`: whether that is an error is the caller's.
 *
 * @module
 */

import { UserError } from "../errors.ts";

/** `Deno.stat(path)`, or null where nothing is; `what` names the path in the error (a flag and the path). */
export async function statOrNull(path: string, what = path): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return null;
    const parts = unreachable(e);
    if (parts === null) throw e;
    throw new UserError(what, parts);
  }
}

/** Why `error` (thrown by a file-system call) means the path cannot be used and the fix, or null. */
export function unreachable(error: unknown): { why: string; fix: string } | null {
  if (error instanceof Deno.errors.NotCapable) {
    return {
      why: "this command may not touch it (Deno refuses paths under /proc, /sys and /dev without " +
        "--allow-all), so it cannot be an input or output",
      fix: "choose a regular file or directory outside /proc, /sys and /dev",
    };
  }
  if (error instanceof Deno.errors.FilesystemLoop) {
    return {
      why: "it is a symbolic link loop (too many levels of symbolic links), so it names no file",
      fix: "point the link at a real file or directory, or pass that path instead",
    };
  }
  if ((error as { code?: string })?.code === "ENAMETOOLONG") {
    return {
      why: "a name in it is longer than the file system allows (255 bytes)",
      fix: "choose a shorter name",
    };
  }
  return null;
}
