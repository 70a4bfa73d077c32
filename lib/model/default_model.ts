/**
 * The default model: `model.path` in the shipped config.yaml names `runs/demo/model`, which no download
 * provides. When a command that loads the model finds that exact path missing, it is made first — the
 * same tiny random Qwen3 with the real Qwen3 tokenizer that `deno task demo` starts from — so every
 * command of the README runs on a fresh clone. Any other missing `model.path` is an error.
 *
 * @module
 */

import { join } from "node:path";
import { writeDirAtomic } from "../fs/atomic_dir.ts";
import { TINY_PRESET, writeRandomQwen3 } from "./random_model.ts";

/** `model.path` in the shipped config.yaml. */
export const DEFAULT_MODEL_PATH = "runs/demo/model";

/** Makes the default model at `path` when `path` is the default and holds no model; returns whether it did. */
export async function ensureDefaultModel(path: string, log: (line: string) => void): Promise<boolean> {
  if (path.replace(/\/+$/, "") !== DEFAULT_MODEL_PATH) return false;
  try {
    await Deno.stat(join(path, "config.json"));
    return false;
  } catch {
    log(`model: ${path} is missing; making the default tiny random Qwen3 there (real Qwen3 tokenizer)`);
    await writeDirAtomic(path, (tmp) => writeRandomQwen3(tmp, TINY_PRESET).then(() => {}), {
      kind: "model-dir",
    });
    return true;
  }
}
