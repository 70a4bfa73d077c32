/**
 * transformers.js as a decode-speed peer: greedy `generate` on an export made by
 * `exportForTransformersJs`, with fixed-length random prompts (no padding) and no stop token.
 *
 * Method: each timed `generate(max_new_tokens = N)` carries a streamer, which transformers.js calls once
 * with the prompt and once after each step's token is chosen. The first step is prefill; the N - 1 steps
 * after it are decode, timed inside the same call from the first token's stamp to the last's. Decode
 * seconds are the median over K timed calls (after a warm-up), decode tok/s = batch · (N - 1) / decode
 * seconds: the same shape as our engine's figure (decode time per run, median over runs). Everything
 * transformers.js does per step (KV cache copied out of and back into onnxruntime, logits processing,
 * JS-side argmax) counts, as it would for a user. (Until 2026-11-28 decode was median t(generate N) −
 * median t(generate 1): on the tiny model at batch 8 the first step alone takes 2–4 s and moves by seconds
 * between calls, all 63 decode steps together under 1 s, so the difference of the two swung several-fold.)
 *
 *   deno run -A bench/peer_transformersjs.ts --dir runs/x/export --batch 1 --prompt 64 --new 32 --repeats 3
 *
 * @module
 */

import { join, resolve } from "node:path";
import { parseArgs } from "@std/cli";
import { UserError } from "../lib/errors.ts";

/** What to measure. */
export interface PeerOptions {
  /** An export directory (config.json, onnx/model.onnx). */
  dir: string;
  batch: number;
  promptLength: number;
  /** New tokens per sequence (at least 2: one comes from prefill). */
  newTokens: number;
  /** Timed generate calls; medians are reported. */
  repeats: number;
  /** Untimed calls first (default 1). */
  warmup?: number;
  /** Seed of the random prompts (default 0). */
  seed?: number;
  /** onnxruntime intra-op threads (default: onnxruntime's choice). */
  threads?: number;
  /** transformers.js device (default "cpu"). */
  device?: "cpu" | "webgpu";
}

/** What was measured (seconds are medians over `repeats`). */
export interface PeerResult {
  peer: "transformers.js";
  version: string;
  device: string;
  batch: number;
  promptLength: number;
  newTokens: number;
  repeats: number;
  /** Model load (session creation) once, seconds. */
  loadSeconds: number;
  /** The first step of generate (prefill and the first token), median over the timed calls. */
  prefillSeconds: number;
  /** The whole generate(max_new_tokens = N) call, median. */
  totalSeconds: number;
  /** The N - 1 steps after the first token, within one call; median over the timed calls. */
  decodeSeconds: number;
  /** batch · (N - 1) / decodeSeconds. */
  decodeTokensPerSecond: number;
  method: string;
}

const METHOD = "decode = the N - 1 steps after the first token inside one generate(N) call (streamer " +
  "stamps), median over calls; greedy, no stop token";

/** Measures transformers.js prefill and decode on the export `o.dir`. */
export async function measureTransformersJsDecode(o: PeerOptions): Promise<PeerResult> {
  checkOptions(o);
  const dir = resolve(o.dir);
  const vocab = await readVocab(dir);
  const tjs = await import("@huggingface/transformers");
  tjs.env.allowRemoteModels = false;
  tjs.env.allowLocalModels = true;
  tjs.env.useFSCache = false;
  tjs.env.useBrowserCache = false;
  const device = o.device ?? "cpu";
  const loadStart = performance.now();
  const model = await tjs.AutoModelForCausalLM.from_pretrained(dir, {
    local_files_only: true,
    dtype: "fp32",
    device,
    session_options: o.threads ? { intraOpNumThreads: o.threads } : {},
  });
  const loadSeconds = (performance.now() - loadStart) / 1000;
  try {
    const ids = randomPrompts(o.batch, o.promptLength, vocab, o.seed ?? 0);
    const shape = [o.batch, o.promptLength];
    const inputs = () => ({
      input_ids: new tjs.Tensor("int64", ids.slice(), shape),
      attention_mask: new tjs.Tensor("int64", new BigInt64Array(ids.length).fill(1n), shape),
    });
    const timeGenerate = async () => {
      const stamps = new StepStamps();
      const args = {
        ...inputs(),
        max_new_tokens: o.newTokens,
        do_sample: false,
        eos_token_id: null,
        streamer: stamps,
      };
      const start = performance.now();
      await model.generate(args as unknown as Parameters<typeof model.generate>[0]);
      return stamps.split(start, performance.now(), o.newTokens);
    };
    for (let i = 0; i < (o.warmup ?? 1); i++) await timeGenerate();
    const runs: CallSplit[] = [];
    for (let i = 0; i < o.repeats; i++) runs.push(await timeGenerate());
    const decodeSeconds = median(runs.map((r) => r.decodeSeconds));
    return {
      peer: "transformers.js",
      version: tjs.env.version,
      device,
      batch: o.batch,
      promptLength: o.promptLength,
      newTokens: o.newTokens,
      repeats: o.repeats,
      loadSeconds,
      prefillSeconds: median(runs.map((r) => r.prefillSeconds)),
      totalSeconds: median(runs.map((r) => r.totalSeconds)),
      decodeSeconds,
      decodeTokensPerSecond: (o.batch * (o.newTokens - 1)) / decodeSeconds,
      method: METHOD,
    };
  } finally {
    await model.dispose();
  }
}

/** One generate call's seconds: the whole call, its first step (prefill) and the N - 1 steps after it. */
export interface CallSplit {
  totalSeconds: number;
  prefillSeconds: number;
  decodeSeconds: number;
}

/**
 * A transformers.js streamer that only stamps the time of each `put`: one for the prompt, then one per
 * step after its token is chosen.
 */
export class StepStamps {
  readonly ms: number[] = [];
  put(_tokens: unknown): void {
    this.ms.push(performance.now());
  }
  end(): void {}

  /** The call's split from its stamps; throws where transformers.js did not put `newTokens` + 1 times. */
  split(startMs: number, endMs: number, newTokens: number): CallSplit {
    if (this.ms.length !== newTokens + 1) {
      throw new Error(
        `transformers.js called the streamer ${this.ms.length} times for ${newTokens} new tokens; ` +
          `the peer's timing needs the prompt's call and one per step (${newTokens + 1})`,
      );
    }
    return {
      totalSeconds: (endMs - startMs) / 1000,
      prefillSeconds: (this.ms[1] - startMs) / 1000,
      decodeSeconds: (this.ms[newTokens] - this.ms[1]) / 1000,
    };
  }
}

/** `batch × length` token ids, uniform below the first special token (151643) and the vocab. */
export function randomPrompts(batch: number, length: number, vocab: number, seed: number): BigInt64Array {
  let state = (seed >>> 0) ^ 0x9e3779b9;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 4294967296;
  };
  const top = Math.min(vocab, 151643);
  return BigInt64Array.from({ length: batch * length }, () => BigInt(Math.floor(next() * top)));
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

async function readVocab(dir: string): Promise<number> {
  const path = join(dir, "config.json");
  try {
    await Deno.stat(join(dir, "onnx", "model.onnx"));
    return JSON.parse(await Deno.readTextFile(path)).vocab_size;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new UserError(`transformers.js export ${dir}`, {
      why: "it has no config.json or onnx/model.onnx",
      fix: "make one with exportForTransformersJs (lib/model/export.ts) and pass its directory",
    });
  }
}

function checkOptions(o: PeerOptions): void {
  const positive = { batch: o.batch, promptLength: o.promptLength, repeats: o.repeats };
  for (const [key, v] of Object.entries(positive)) {
    if (!Number.isSafeInteger(v) || v < 1) {
      throw new UserError(`peer bench ${key}`, {
        value: v,
        why: "must be a positive integer",
        fix: "pass one",
      });
    }
  }
  if (!Number.isSafeInteger(o.newTokens) || o.newTokens < 2) {
    throw new UserError("peer bench newTokens", {
      value: o.newTokens,
      why: "must be an integer of at least 2 (the first token comes from prefill)",
      fix: "pass e.g. 32",
    });
  }
}

export const HELP = `deno run -A bench/peer_transformersjs.ts --dir EXPORT [flags]

Times transformers.js greedy generate on an export from exportForTransformersJs: random prompts of one
length, no padding, no stop token. decode = the N - 1 steps after the first token inside one generate(N)
call (a streamer stamps each step), median over the timed calls.

  --dir DIR        the export directory (config.json, onnx/model.onnx, onnx/model.onnx_data)
  --batch N        sequences per call (default 1)
  --prompt N       prompt tokens (default 64)
  --new N          new tokens per sequence, at least 2 (default 32)
  --repeats K      timed generate calls, median reported (default 3)
  --warmup N       untimed calls first (default 1)
  --threads N      onnxruntime intra-op threads (default: onnxruntime's choice)
  --seed N         prompt seed (default 0)
  --device D       cpu (default) or webgpu
  --json           print the result as JSON
  --debug          show stack traces
  --help           this text`;

/** Parses flags into options, or "help". */
export function optionsFromArgs(args: string[]): { options: PeerOptions; json: boolean } | "help" {
  const ints = ["batch", "prompt", "new", "repeats", "warmup", "threads", "seed"];
  let parsed;
  try {
    parsed = parseArgs(args, { string: ["dir", "device", ...ints], boolean: ["json", "help", "debug"] });
  } catch (e) {
    throw new UserError("peer bench flags", {
      value: args.join(" "),
      why: (e as Error).message,
      fix: "see --help",
    });
  }
  const v = parsed.values;
  if (v.help) return "help";
  if (typeof v.dir !== "string") {
    throw new UserError("--dir", { why: "it is required", fix: "pass --dir EXPORT" });
  }
  const int = (flag: string, fallback?: number) => {
    const text = v[flag];
    if (text === undefined) return fallback;
    if (typeof text !== "string" || !/^\d+$/.test(text)) {
      throw new UserError(`--${flag}`, {
        value: text,
        why: "must be a non-negative integer",
        fix: `pass --${flag} N`,
      });
    }
    return Number(text);
  };
  const device = (v.device as string | undefined) ?? "cpu";
  if (device !== "cpu" && device !== "webgpu") {
    throw new UserError("--device", { value: device, why: "unknown device", fix: "use cpu or webgpu" });
  }
  return {
    json: Boolean(v.json),
    options: {
      dir: v.dir,
      batch: int("batch", 1)!,
      promptLength: int("prompt", 64)!,
      newTokens: int("new", 32)!,
      repeats: int("repeats", 3)!,
      warmup: int("warmup", 1),
      threads: int("threads"),
      seed: int("seed", 0),
      device,
    },
  };
}

/** CLI entry: one-line errors with exit code 2, stack traces only with --debug. */
export async function main(args: string[]): Promise<number> {
  try {
    const parsed = optionsFromArgs(args);
    if (parsed === "help") {
      console.log(HELP);
      return 0;
    }
    const r = await measureTransformersJsDecode(parsed.options);
    if (parsed.json) console.log(JSON.stringify(r, null, 2));
    else {
      console.log(
        `transformers.js ${r.version} (${r.device}) batch ${r.batch}, prompt ${r.promptLength}, ` +
          `${r.newTokens} new: first step ${r.prefillSeconds.toFixed(3)} s, total ${
            r.totalSeconds.toFixed(3)
          } s, ` +
          `decode ${r.decodeSeconds.toFixed(3)} s = ${r.decodeTokensPerSecond.toFixed(1)} tok/s ` +
          `(median of ${r.repeats}; load ${r.loadSeconds.toFixed(1)} s)`,
      );
    }
    return 0;
  } catch (e) {
    if (e instanceof UserError && !args.includes("--debug")) {
      console.error(`error: ${e.message}`);
      return 2;
    }
    throw e;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
