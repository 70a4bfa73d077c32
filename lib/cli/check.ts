/**
 * Argument checks a stage makes before any work, each a one-line UserError that names the flag or
 * config key and a fix the command-line user can apply: an input stage file exists, is a file and
 * carries the manifest of the expected kind; a model directory and an adapter directory look like
 * one (their JSON files exist); the output path passes the output policy (lib/fs/output.ts).
 *
 * These are cheap checks on names and small JSON files; the stage's own reader still checks the
 * contents in full when it loads them.
 *
 * @module
 */

import { parseKind, realPathOf, specialKind } from "../fs/output.ts";
import { statOrNull } from "../fs/stat.ts";
import { join } from "node:path";
import { UserError } from "../errors.ts";
import { readTextIfExists } from "../fs/read.ts";
import { recoverReplacement } from "../fs/replace.ts";
import { KINDS, type StageKind } from "../arrow/kinds.ts";

/** Checks `--in`: a stage file of `kind` with its manifest (a replacement cut short is undone first). */
export async function checkInputFile(flag: string, path: string, kind?: StageKind): Promise<void> {
  await recoverReplacement(path, true).catch(() => {});
  const info = await statOrNull(path, `${flag} ${path}`);
  const writer = kind ? `deno task ${KINDS[kind].stage}` : "the stage that writes it";
  if (!info) {
    throw new UserError(`${flag} ${path}`, {
      why: "it does not exist",
      fix: `check the path, or run ${writer} first`,
    });
  }
  if (!info.isFile) {
    // Named from stat alone: opening a FIFO would block until something writes to it.
    throw new UserError(`${flag} ${path}`, {
      why: `it is ${specialKind(info) ?? "a directory"}, not a stage file`,
      fix: `pass the .arrow file written by ${writer}`,
    });
  }
  const manifest = await readTextIfExists(`${path}.manifest.json`);
  const found = manifest === null ? null : parseKind(manifest);
  if (found === null) {
    throw new UserError(`${flag} ${path}`, {
      why:
        `it has no valid manifest (${path}.manifest.json), so no stage of this toolkit finished writing it`,
      fix: `run ${writer} again to write it`,
    });
  }
  if (kind && found !== kind) {
    throw new UserError(`${flag} ${path}`, {
      value: found,
      why: `it is a ${found} file; this stage reads a ${kind} file (${KINDS[kind].fileName})`,
      fix: `pass the ${kind} file written by deno task ${KINDS[kind].stage}`,
    });
  }
}

/**
 * Refuses the same file given twice among `paths` (the same real path, or the same bytes by the sha256
 * of its manifest): read as one, it would silently count every episode twice.
 */
export async function checkDistinctInputs(flag: string, paths: readonly string[]): Promise<void> {
  const seen = new Map<string, string>();
  for (const path of paths) {
    const real = await realPathOf(path);
    const manifest = await readTextIfExists(`${path}.manifest.json`).catch(() => null);
    const sha256 = manifest === null ? null : manifestSha256(manifest);
    for (const key of [`path:${real}`, sha256 ? `sha256:${sha256}` : null]) {
      if (!key) continue;
      const earlier = seen.get(key);
      if (earlier !== undefined) {
        throw new UserError(`${flag} ${path}`, {
          why: `it is the same file as ${flag} ${earlier} (${
            key.startsWith("path:") ? "the same path" : "the same bytes"
          }), so its episodes would be read twice`,
          fix: `pass each file once to ${flag}`,
        });
      }
      seen.set(key, path);
    }
  }
}

function manifestSha256(text: string): string | null {
  try {
    const sha256 = JSON.parse(text)?.sha256;
    return typeof sha256 === "string" ? sha256 : null;
  } catch {
    return null;
  }
}

/** Checks that `path` (the value of config key or flag `name`) is a Qwen3 model directory. */
export async function checkModelDir(name: string, path: string): Promise<void> {
  await checkDirWith(name, path, "config.json", {
    what: "a Qwen3 model directory",
    fix: `set ${name} to a directory holding config.json and *.safetensors ` +
      "(deno task make-model --out DIR makes a random one)",
  });
}

/** Checks that `path` (config key or flag `name`) is a PEFT adapter or train checkpoint directory. */
export async function checkAdapterDir(name: string, path: string): Promise<void> {
  await checkDirWith(name, path, "adapter_config.json", {
    what: "a PEFT adapter directory",
    fix:
      `set ${name} to a directory written by deno task train (holding adapter_config.json), or leave it out`,
  });
}

async function checkDirWith(
  name: string,
  path: string,
  file: string,
  expect: { what: string; fix: string },
): Promise<void> {
  const info = await statOrNull(path, `${name} ${path}`);
  const why = !info
    ? "it does not exist"
    : !info.isDirectory
    ? `it is ${specialKind(info) ?? "a file"}, not ${expect.what}`
    : !(await statOrNull(join(path, file)))
    ? `it has no ${file}, so it is not ${expect.what}`
    : null;
  if (why) throw new UserError(name, { value: path, why, fix: expect.fix });
}
