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

import { parseKind, statOrNull } from "../fs/output.ts";
import { join } from "node:path";
import { UserError } from "../errors.ts";
import { readTextIfExists } from "../fs/read.ts";
import { recoverReplacement } from "../fs/replace.ts";
import { KINDS, type StageKind } from "../arrow/kinds.ts";

/** Checks `--in`: a stage file of `kind` with its manifest (a replacement cut short is undone first). */
export async function checkInputFile(flag: string, path: string, kind?: StageKind): Promise<void> {
  await recoverReplacement(path, true).catch(() => {});
  const info = await statOrNull(path);
  const writer = kind ? `deno task ${KINDS[kind].stage}` : "the stage that writes it";
  if (!info) {
    throw new UserError(`${flag} ${path}`, {
      why: "it does not exist",
      fix: `check the path, or run ${writer} first`,
    });
  }
  if (!info.isFile) {
    throw new UserError(`${flag} ${path}`, {
      why: "it is a directory, not a stage file",
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
  const info = await statOrNull(path);
  const why = !info
    ? "it does not exist"
    : !info.isDirectory
    ? `it is a file, not ${expect.what}`
    : !(await statOrNull(join(path, file)))
    ? `it has no ${file}, so it is not ${expect.what}`
    : null;
  if (why) throw new UserError(name, { value: path, why, fix: expect.fix });
}
