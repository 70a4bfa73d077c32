/**
 * The output policy every stage and tool follows (docs/outputs.md), checked before any work:
 *
 * - an output path that does not exist (or an empty directory) is created;
 * - an existing output is replaced only when it is a complete output of the same kind made by this
 *   toolkit, and only with `--overwrite` (`overwrite: true`);
 * - never when it is an input, an ancestor of an input or inside an input directory (model, adapter,
 *   `read_file_root`), the current directory or one of its ancestors, a repository root, the
 *   toolkit's own directory, the home directory or `/`, nor anything that is not a regular file or
 *   directory (a device such as `/dev/null`, a FIFO, a socket);
 * - the directory that receives the write must be writable (probed with a real temporary entry, so a
 *   read-only mount is refused even for root);
 * - anything else is refused with one line naming the path and the fix; nothing is deleted.
 *
 * Nothing here creates the output or its parents: `createOutputParents` does that once every check of
 * the command has passed.
 *
 * "Made by this toolkit": a stage file has its manifest (`FILE.manifest.json`) naming the same kind; a
 * directory holds the marker file `.deno-rl-output.json` naming its kind (written last, inside the
 * atomic directory write); an HTML report holds the marker comment `HTML_MARKER`.
 *
 * @module
 */

import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { UserError } from "../errors.ts";
import { readTextIfExists } from "./read.ts";
import { recoverReplacement } from "./replace.ts";
import { statOrNull } from "./stat.ts";

/** What an output path holds. */
export type OutputSpec =
  | { kind: "stage-file"; fileKind: string }
  | { kind: "adapter-dir" }
  | { kind: "run-dir" }
  | { kind: "model-dir" }
  | { kind: "judge-cache" }
  | { kind: "html" };

export type OutputDirKind = "adapter-dir" | "run-dir" | "model-dir" | "judge-cache";

/** The marker file inside every directory output, written last. */
export const OUTPUT_MARKER = ".deno-rl-output.json";

/** The comment an HTML report carries (anywhere in its first 4 KiB) to be recognised as ours. */
export const HTML_MARKER = "<!-- deno-rl-output: html -->";

export interface OutputCheck {
  /**
   * Paths the command reads (stage files, model and adapter directories, the config file, data.path,
   * read_file_root): the output may not be one, hold one, or lie inside one.
   */
  inputs?: Array<string | undefined | null>;
  /** Input directories the output may lie inside (the report's run directory), but not be or hold. */
  hosts?: Array<string | undefined | null>;
  /** Replace an existing output of ours (`--overwrite`). */
  overwrite?: boolean;
  /** Accept an existing output of ours without `--overwrite`, to continue it (a run directory). */
  resume?: boolean;
  /**
   * Makers (the `by` of a directory's marker) whose outputs may be replaced without `--overwrite`: the
   * demo replaces an earlier demo's outputs, never a loop run's, unless told to.
   */
  replaceMadeBy?: string[];
  /** How to name the flag in messages (default `--out`). */
  flag?: string;
}

/** What is at the output path now; `ours` means a complete output of the same kind that may be replaced. */
export type OutputState = "absent" | "empty" | "ours";

/** The toolkit's own directory (the repository this file belongs to). */
const TOOLKIT_ROOT = resolve(fileURLToPath(new URL("../..", import.meta.url)));

/**
 * Checks that `path` may be written as an output of `spec`; throws a one-line UserError otherwise.
 * First restores an output left aside by a replacement that was killed (lib/fs/replace.ts).
 */
export async function checkOutputPath(
  path: string,
  spec: OutputSpec,
  opts: OutputCheck = {},
): Promise<OutputState> {
  const flag = opts.flag ?? "--out";
  // First the path itself: /proc, /sys, a symlink loop, an over-long name or a device is refused here.
  const given = await statOrNull(path, `${flag} ${path}`);
  if (given) refuseSpecialFile(path, given, flag);
  const abs = await realPathOf(path);
  await refuseProtected(path, abs, flag, opts);
  await recoverReplacement(abs, spec.kind === "stage-file");
  const info = await statOrNull(abs);
  if (!info) {
    await checkWritable(path, abs, flag);
    return "absent";
  }
  refuseSpecialFile(path, info, flag);
  if (info.isDirectory && spec.kind !== "stage-file" && spec.kind !== "html" && await isEmptyDir(abs)) {
    await checkWritable(path, abs, flag, true);
    return "empty";
  }
  const found = await describeExisting(abs, info);
  if (found !== kindName(spec)) {
    throw new UserError(`${flag} ${path}`, {
      why:
        `it already exists and is ${article(found)}, not ${
          article(kindName(spec))
        } written by this toolkit; ` +
        "nothing was changed",
      fix:
        `choose a new path for ${flag} (an existing output is replaced only when it is ours and of the same kind)`,
    });
  }
  if (!opts.overwrite && !opts.resume && !(await madeByOneOf(abs, info, opts.replaceMadeBy))) {
    throw new UserError(`${flag} ${path}`, {
      why: `it already holds ${article(found)} from an earlier run; nothing was changed`,
      fix: `pass --overwrite to replace it, or choose a new path for ${flag}`,
    });
  }
  await checkWritable(path, abs, flag, info.isDirectory);
  return "ours";
}

/** Creates the missing parent directories of an output (call it once every argument check passed). */
export async function createOutputParents(path: string): Promise<void> {
  await Deno.mkdir(dirname(resolve(path)), { recursive: true });
}

/**
 * Writes the marker of a directory output into `dir` (call it last, inside the atomic write); `by`
 * names the command that made it when another command must tell its own outputs apart (the demo).
 */
export async function writeOutputMarker(
  dir: string,
  kind: OutputDirKind | "dir",
  by?: string,
): Promise<void> {
  const text = JSON.stringify({ kind, ...(by ? { by } : {}), written_at: new Date().toISOString() }) + "\n";
  await Deno.writeTextFile(join(dir, OUTPUT_MARKER), text);
}

/** The kind a directory's marker names, or null when it has none (or an unreadable one). */
export async function readOutputMarker(dir: string): Promise<string | null> {
  return await markerField(dir, "kind");
}

/** The command a directory's marker says made it (`by`), or null when it names none. */
export async function readOutputMaker(dir: string): Promise<string | null> {
  return await markerField(dir, "by");
}

async function markerField(dir: string, field: "kind" | "by"): Promise<string | null> {
  const text = await readTextIfExists(join(dir, OUTPUT_MARKER)).catch(() => null);
  if (text === null) return null;
  try {
    const value = JSON.parse(text)?.[field];
    return typeof value === "string" ? value : null;
  } catch {
    return null;
  }
}

async function madeByOneOf(abs: string, info: Deno.FileInfo, makers?: string[]): Promise<boolean> {
  if (!makers?.length || !info.isDirectory) return false;
  const maker = await readOutputMaker(abs);
  return maker !== null && makers.includes(maker);
}

/** What a non-regular file is, for messages: "a FIFO (named pipe)", "a character device", … */
export function specialKind(info: Deno.FileInfo): string | null {
  if (info.isFile || info.isDirectory) return null;
  if (info.isFifo) return "a FIFO (named pipe)";
  if (info.isSocket) return "a socket";
  if (info.isCharDevice) return "a character device";
  if (info.isBlockDevice) return "a block device";
  return "not a regular file or directory";
}

/** Refuses a device, FIFO or socket as an output (writing one would lose the data or block). */
function refuseSpecialFile(path: string, info: Deno.FileInfo, flag: string): void {
  const kind = specialKind(info);
  if (!kind) return;
  throw new UserError(`${flag} ${path}`, {
    why:
      `it is ${kind}, not a regular file or directory, so no output can be written there; nothing was changed`,
    fix: `choose a path for ${flag} that does not exist yet (a new file or directory)`,
  });
}

/** A short description of what is at `abs`: an output kind name, or what else it is. */
async function describeExisting(abs: string, info: Deno.FileInfo): Promise<string> {
  if (info.isDirectory) {
    const marker = await readOutputMarker(abs);
    if (marker && marker !== "dir") return marker;
    // Checkpoints written before markers existed, or by a writer that names no kind.
    if (await isLegacyCheckpoint(abs)) return "adapter-dir";
    return marker ? "a directory output of another kind" : "a directory this toolkit did not write";
  }
  const manifest = await readTextIfExists(`${abs}.manifest.json`).catch(() => null);
  if (manifest !== null) {
    const kind = parseKind(manifest);
    if (kind) return `stage-file:${kind}`;
  }
  if (/\.html?$/i.test(abs) && (await firstBytes(abs, 4096)).includes(HTML_MARKER)) return "html";
  return "a file this toolkit did not write";
}

/** Checkpoints written by the train stage before markers existed: trainer_state.json with our version. */
async function isLegacyCheckpoint(dir: string): Promise<boolean> {
  const text = await readTextIfExists(join(dir, "trainer_state.json")).catch(() => null);
  if (text === null) return false;
  try {
    return typeof JSON.parse(text)?.toolkit_version === "string";
  } catch {
    return false;
  }
}

function kindName(spec: OutputSpec): string {
  return spec.kind === "stage-file" ? `stage-file:${spec.fileKind}` : spec.kind;
}

/** "a batch stage file", "an adapter directory", … for messages. */
function article(kind: string): string {
  const names: Record<string, string> = {
    "adapter-dir": "an adapter directory",
    "run-dir": "a run directory",
    "model-dir": "a model directory",
    "judge-cache": "a judge cache directory",
    "html": "an HTML report",
  };
  if (names[kind]) return names[kind];
  if (kind.startsWith("stage-file:")) return `a ${kind.slice("stage-file:".length)} stage file`;
  return kind;
}

/** The `kind` of a manifest or marker file's JSON text (null when it has none). */
export function parseKind(text: string): string | null {
  try {
    const kind = JSON.parse(text)?.kind;
    return typeof kind === "string" ? kind : null;
  } catch {
    return null;
  }
}

/**
 * Refuses `/`, home, the current directory and its ancestors, repository roots, inputs, their ancestors
 * and paths inside an input directory (except inside a `host`).
 */
async function refuseProtected(path: string, abs: string, flag: string, opts: OutputCheck) {
  const refuse = (why: string) =>
    new UserError(`${flag} ${path}`, {
      why: `${why}; nothing was changed`,
      fix: `choose a new path for ${flag}`,
    });
  if (abs === "/") throw refuse("it is the root directory");
  const home = Deno.build.os === "windows" ? undefined : envHome();
  if (home && abs === await realPathOf(home)) throw refuse("it is the home directory");
  const cwd = await realPathOf(Deno.cwd());
  if (isAncestorOrSelf(abs, cwd)) throw refuse("it is the current directory or one of its parents");
  if (isAncestorOrSelf(abs, TOOLKIT_ROOT)) {
    throw refuse("it is the toolkit's own directory or one of its parents");
  }
  if (await statOrNull(join(abs, ".git"))) throw refuse("it is the root of a git repository");
  const hosts = opts.hosts ?? [];
  for (const input of [...(opts.inputs ?? []), ...hosts]) {
    if (!input) continue;
    const inAbs = await realPathOf(input);
    if (abs === inAbs) throw refuse(`it is an input of this command (${input})`);
    if (isAncestorOrSelf(abs, inAbs)) throw refuse(`it holds an input of this command (${input})`);
    if (isAncestorOrSelf(inAbs, abs) && !hosts.includes(input)) {
      throw refuse(`it is inside an input of this command (${input})`);
    }
  }
}

/** Whether `a` is `b` or a directory above it. */
export function isAncestorOrSelf(a: string, b: string): boolean {
  if (a === b) return true;
  const prefix = a.endsWith("/") ? a : `${a}/`;
  return b.startsWith(prefix);
}

function envHome(): string | undefined {
  try {
    return Deno.env.get("HOME") || undefined;
  } catch {
    return undefined; // no --allow-env: the home directory is still protected as a non-empty foreign dir
  }
}

/**
 * The directory that receives the write must be writable: the nearest existing ancestor (an output
 * written beside its old self, or parents created in it), and with `inPlace` the existing directory
 * itself. Probed by making and removing a temporary directory, which a read-only mount refuses even
 * to root (permission bits do not).
 */
async function checkWritable(path: string, abs: string, flag: string, inPlace = false): Promise<void> {
  let parent = dirname(abs);
  let info = await statOrNull(parent);
  while (!info && parent !== dirname(parent)) {
    parent = dirname(parent);
    info = await statOrNull(parent);
  }
  if (info && !info.isDirectory) {
    throw new UserError(`${flag} ${path}`, {
      why: `its parent ${parent} is a file, not a directory`,
      fix: `choose a path for ${flag} inside a directory`,
    });
  }
  for (const dir of inPlace ? [parent, abs] : [parent]) {
    try {
      await Deno.remove(await Deno.makeTempDir({ dir, prefix: ".deno-rl-probe-" }));
    } catch (e) {
      throw new UserError(`${flag} ${path}`, {
        why: `the directory ${dir} is not writable (${
          (e as Error).message.split("\n")[0]
        }); nothing was changed`,
        fix: `choose a path for ${flag} in a directory you can write (or make ${dir} writable)`,
      });
    }
  }
}

/** The absolute path with symlinks of its existing part resolved. */
export async function realPathOf(path: string): Promise<string> {
  const abs = resolve(path);
  try {
    return await Deno.realPath(abs);
  } catch {
    const parent = dirname(abs);
    if (parent === abs) return abs;
    return join(await realPathOf(parent), basename(abs));
  }
}

async function isEmptyDir(dir: string): Promise<boolean> {
  for await (const _ of Deno.readDir(dir)) return false;
  return true;
}

async function firstBytes(path: string, n: number): Promise<string> {
  const file = await Deno.open(path, { read: true });
  try {
    const buf = new Uint8Array(n);
    const got = await file.read(buf);
    return new TextDecoder().decode(buf.subarray(0, got ?? 0));
  } finally {
    file.close();
  }
}
