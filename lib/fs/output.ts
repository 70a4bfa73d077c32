/**
 * The output policy every stage and tool follows (docs/outputs.md), checked before any work:
 *
 * - an output path that does not exist (or an empty directory) is created;
 * - an existing output is replaced only when it is a complete output of the same kind made by this
 *   toolkit, and only with `--overwrite` (`overwrite: true`);
 * - never when it is an input, an ancestor of an input, the current directory or one of its
 *   ancestors, a repository root, the toolkit's own directory, the home directory or `/`;
 * - anything else is refused with one line naming the path and the fix; nothing is deleted.
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

/** What an output path holds. */
export type OutputSpec =
  | { kind: "stage-file"; fileKind: string }
  | { kind: "adapter-dir" }
  | { kind: "run-dir" }
  | { kind: "model-dir" }
  | { kind: "html" };

export type OutputDirKind = "adapter-dir" | "run-dir" | "model-dir";

/** The marker file inside every directory output, written last. */
export const OUTPUT_MARKER = ".deno-rl-output.json";

/** The comment an HTML report carries (anywhere in its first 4 KiB) to be recognised as ours. */
export const HTML_MARKER = "<!-- deno-rl-output: html -->";

export interface OutputCheck {
  /** Paths the command reads (stage files, model and adapter directories, the config file). */
  inputs?: Array<string | undefined | null>;
  /** Replace an existing output of ours (`--overwrite`). */
  overwrite?: boolean;
  /** Accept an existing output of ours without `--overwrite`, to continue it (a run directory). */
  resume?: boolean;
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
  const abs = await realPathOf(path);
  await refuseProtected(path, abs, flag, opts.inputs ?? []);
  await recoverReplacement(abs, spec.kind === "stage-file");
  const info = await statOrNull(abs);
  if (!info) {
    await checkParentWritable(path, abs, flag);
    return "absent";
  }
  if (info.isDirectory && spec.kind !== "stage-file" && spec.kind !== "html" && await isEmptyDir(abs)) {
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
  if (!opts.overwrite && !opts.resume) {
    throw new UserError(`${flag} ${path}`, {
      why: `it already holds ${article(found)} from an earlier run; nothing was changed`,
      fix: `pass --overwrite to replace it, or choose a new path for ${flag}`,
    });
  }
  return "ours";
}

/** Writes the marker of a directory output into `dir` (call it last, inside the atomic write). */
export async function writeOutputMarker(dir: string, kind: OutputDirKind | "dir"): Promise<void> {
  const text = JSON.stringify({ kind, written_at: new Date().toISOString() }) + "\n";
  await Deno.writeTextFile(join(dir, OUTPUT_MARKER), text);
}

/** The kind a directory's marker names, or null when it has none (or an unreadable one). */
export async function readOutputMarker(dir: string): Promise<string | null> {
  const text = await readTextIfExists(join(dir, OUTPUT_MARKER)).catch(() => null);
  if (text === null) return null;
  try {
    const kind = JSON.parse(text)?.kind;
    return typeof kind === "string" ? kind : null;
  } catch {
    return null;
  }
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
  if (!info.isFile) return "not a regular file or directory";
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

/** Refuses `/`, home, the current directory and its ancestors, repository roots, inputs and their ancestors. */
async function refuseProtected(
  path: string,
  abs: string,
  flag: string,
  inputs: Array<string | undefined | null>,
) {
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
  for (const input of inputs) {
    if (!input) continue;
    const inAbs = await realPathOf(input);
    if (abs === inAbs) throw refuse(`it is an input of this command (${input})`);
    if (isAncestorOrSelf(abs, inAbs)) throw refuse(`it holds an input of this command (${input})`);
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

/** The nearest existing ancestor must be a writable directory (probed by making and removing a temp dir). */
async function checkParentWritable(path: string, abs: string, flag: string): Promise<void> {
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
  try {
    await Deno.remove(await Deno.makeTempDir({ dir: parent, prefix: ".deno-rl-probe-" }));
  } catch (e) {
    throw new UserError(`${flag} ${path}`, {
      why: `its directory ${parent} is not writable (${(e as Error).message.split("\n")[0]})`,
      fix: `choose a path for ${flag} in a directory you can write`,
    });
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

/** `Deno.stat`, or null where nothing is (a missing path, or a parent that is a file). */
export async function statOrNull(path: string): Promise<Deno.FileInfo | null> {
  try {
    return await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return null;
    throw e;
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
