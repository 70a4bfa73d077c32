/**
 * The default model: `model.path` in the shipped config.yaml names `runs/demo/model`, which no download
 * provides. When a command that loads the model finds nothing at that exact path, it is made — the same
 * tiny random Qwen3 with the real Qwen3 tokenizer that `deno task demo` starts from — so every command of
 * the README runs on a fresh clone. Any other missing `model.path` is an error, and anything already at
 * the default path but an empty directory (even a directory without config.json) is left alone and
 * checked as a model.
 *
 * The stages ask `defaultModelMissing` while checking their arguments and call `ensureDefaultModel` only
 * after every check passed, so a refused command writes nothing (lib/cli/cli.ts).
 *
 * @module
 */

import { writeDirAtomic } from "../fs/atomic_dir.ts";
import { pathExists } from "../fs/read.ts";
import { TINY_PRESET, writeRandomQwen3 } from "./random_model.ts";

/** `model.path` in the shipped config.yaml. */
export const DEFAULT_MODEL_PATH = "runs/demo/model";

/** The maker named in the default model's output marker (the demo may replace it). */
export const DEFAULT_MODEL_MAKER = "default-model";

/** Whether `path` is the default model path and nothing (or an empty directory) is there: it will be made. */
export async function defaultModelMissing(path: string): Promise<boolean> {
  if (path.replace(/\/+$/, "") !== DEFAULT_MODEL_PATH) return false;
  if (!(await pathExists(path))) return true;
  try {
    for await (const _ of Deno.readDir(path)) return false;
    return true;
  } catch {
    return false; // a file, or unreadable: left to the model check's message
  }
}

/** Makes the default model at `path` when `defaultModelMissing(path)`; returns whether it did. */
export async function ensureDefaultModel(path: string, log: (line: string) => void): Promise<boolean> {
  if (!(await defaultModelMissing(path))) return false;
  log(`model: ${path} is missing; making the default tiny random Qwen3 there (real Qwen3 tokenizer)`);
  await writeDirAtomic(path, (tmp) => writeRandomQwen3(tmp, TINY_PRESET).then(() => {}), {
    kind: "model-dir",
    by: DEFAULT_MODEL_MAKER,
  });
  return true;
}
