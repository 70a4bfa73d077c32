/**
 * The judge's answers, cached by content so a rerun of the stage does not pay twice.
 *
 * Key: sha256 of the JSON of what decides an answer — the model name, the mode, the rubric, the exact
 * request messages (which hold the rubric, the task and the episodes as shown) and the sampling settings
 * (temperature, max_tokens) and `max_score`. The server's URL and key are not part of it: the same model
 * moved to another address gives the same answers. Value: one JSON file per key,
 * `DIR/<first two hex digits>/<key>.json`, holding the key, the model, the raw answer and the grades read
 * from it; written atomically as each answer arrives, so an interrupted stage keeps what it paid for.
 * An unparseable answer is cached too (at temperature 0 it would come back the same): delete the cache
 * directory, or change the rubric, to ask again. An entry that does not read back (a torn or foreign file)
 * is asked again and rewritten, never trusted.
 *
 * The directory is an output (docs/outputs.md): `score.judge.cache_dir`, or `judge-cache/` beside the
 * command's output; it is checked by the output policy before use, marked as a judge cache
 * (`.deno-rl-output.json`), and reused by any later command that names it, without `--overwrite`.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { writeTextAtomic } from "../../fs/atomic.ts";
import { checkOutputPath, readOutputMarker, writeOutputMarker } from "../../fs/output.ts";
import { readTextIfExists } from "../../fs/read.ts";
import { sha256Hex } from "../../fs/sha256.ts";
import type { JudgeConfig } from "../../config/schema.ts";
import type { JudgeMessage } from "./prompt.ts";

/** The default cache directory's name, beside a command's output (or in a run directory). */
export const JUDGE_CACHE_NAME = "judge-cache";

/** One cached answer. */
export interface CachedAnswer {
  key: string;
  model: string;
  /** The judge's answer, as it came. */
  answer: string;
  /** The grades read from it (null: unparseable), for people reading the cache. */
  grades: number[] | null;
}

/** `judge-cache/` beside `output` (a stage file's path). */
export function judgeCacheBeside(output: string): string {
  return join(dirname(output), JUDGE_CACHE_NAME);
}

/** The cache key of one request. */
export async function judgeCacheKey(c: JudgeConfig, messages: JudgeMessage[]): Promise<string> {
  const identity = {
    model: c.model,
    mode: c.mode,
    rubric: c.rubric,
    max_score: c.max_score,
    temperature: c.temperature,
    max_tokens: c.max_tokens,
    messages: messages.map((m) => ({ role: m.role, content: m.content })),
  };
  return await sha256Hex(new TextEncoder().encode(JSON.stringify(identity)));
}

export class JudgeCache {
  readonly dir: string;
  #created?: Promise<void>;

  private constructor(dir: string) {
    this.dir = dir;
  }

  /**
   * Checks `dir` against the output policy (not an input, the current directory, a directory we did not
   * write, ...; one-line UserError naming `score.judge.cache_dir`). Nothing is created until the first
   * answer is stored, so a judge that never answers leaves nothing behind.
   */
  static async open(dir: string, inputs: Array<string | null | undefined> = []): Promise<JudgeCache> {
    await checkJudgeCacheDir(dir, inputs);
    return new JudgeCache(dir);
  }

  /** Creates the directory and its marker, once. */
  #create(): Promise<void> {
    return this.#created ??= (async () => {
      await Deno.mkdir(this.dir, { recursive: true });
      if (await readOutputMarker(this.dir) === null) await writeOutputMarker(this.dir, "judge-cache");
    })();
  }

  #path(key: string): string {
    return join(this.dir, key.slice(0, 2), `${key}.json`);
  }

  /** The cached answer of `key`, or null when there is none (or none that reads back whole). */
  async get(key: string): Promise<CachedAnswer | null> {
    const text = await readTextIfExists(this.#path(key));
    if (text === null) return null;
    try {
      const entry = JSON.parse(text) as CachedAnswer;
      return entry?.key === key && typeof entry.answer === "string" ? entry : null;
    } catch {
      return null;
    }
  }

  async put(entry: CachedAnswer): Promise<void> {
    const path = this.#path(entry.key);
    await this.#create();
    await Deno.mkdir(dirname(path), { recursive: true });
    await writeTextAtomic(path, JSON.stringify(entry) + "\n");
  }
}

/** The cache directory may be written by this command (the output policy, docs/outputs.md). */
export async function checkJudgeCacheDir(
  dir: string,
  inputs: Array<string | null | undefined> = [],
): Promise<void> {
  await checkOutputPath(dir, { kind: "judge-cache" }, {
    inputs,
    resume: true,
    flag: "score.judge.cache_dir",
  });
}
