/**
 * One reader for the files a command reads whole (the config file, a dataset): before opening it,
 * the path must be a regular file (a FIFO would block forever, `/dev/zero` or a link to it would never
 * end, a directory named `x.jsonl` is no file) no larger than the reader holds in memory; each
 * refusal is one line naming the path, the reason and the fix.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { specialKind } from "./output.ts";
import { statOrNull } from "./stat.ts";

export interface InputFileSpec {
  /** How messages name the file, e.g. `dataset file data/x.jsonl`. */
  what: string;
  /** What the file should be, e.g. `a .jsonl or .parquet file`. */
  expect: string;
  /** The fix for a path that is missing. */
  missingFix: string;
  /** The fix for a path that is something else, or too large. */
  fix: string;
  /** The most bytes read whole (the file is refused above it). */
  maxBytes: number;
}

/** Reads `path` whole after checking it is a regular file of at most `spec.maxBytes` bytes. */
export async function readInputFile(path: string, spec: InputFileSpec): Promise<Uint8Array> {
  const info = await statOrNull(path, spec.what);
  const refuse = (why: string, fix = spec.fix) => new UserError(spec.what, { why, fix });
  if (info === null) throw refuse("it does not exist", spec.missingFix);
  if (!info.isFile) throw refuse(`it is ${specialKind(info) ?? "a directory"}, not ${spec.expect}`);
  if (info.size > spec.maxBytes) {
    throw refuse(
      `it is ${mib(info.size)} MiB, more than the ${mib(spec.maxBytes)} MiB this reader holds in memory`,
    );
  }
  return await Deno.readFile(path);
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(bytes < 2 ** 20 ? 2 : 0);
}
