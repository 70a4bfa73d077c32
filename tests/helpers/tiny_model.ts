/**
 * Tiny Qwen3 model directories for tests, made by the project's own random-init writer and cached per
 * option set for the life of the test process (one temp directory per distinct options).
 *
 * @module
 */

import { join } from "node:path";
import { type RandomQwen3Options, TINY_PRESET, writeRandomQwen3 } from "../../lib/model/random_model.ts";

const cache = new Map<string, Promise<string>>();
let root: Promise<string> | null = null;
let made = 0;

/**
 * Returns the directory of a random Qwen3 model: by default 2 layers, hidden 64, 4 heads, 2 KV heads,
 * head dim 16, MLP 128, float32, tied head, seed 0; `opts` overrides any field.
 */
export function makeTinyModel(opts: Partial<RandomQwen3Options> = {}): Promise<string> {
  const options: RandomQwen3Options = { ...TINY_PRESET, ...opts };
  const key = JSON.stringify(Object.entries(options).sort(([a], [b]) => a.localeCompare(b)));
  let dir = cache.get(key);
  if (!dir) {
    dir = build(options, made++);
    cache.set(key, dir);
    dir.catch(() => cache.delete(key)); // let a later call retry after a failure
  }
  return dir;
}

async function build(options: RandomQwen3Options, n: number): Promise<string> {
  root ??= Deno.makeTempDir({ prefix: "tiny-qwen3-" });
  return (await writeRandomQwen3(join(await root, `model-${n}`), options)).dir;
}
