/**
 * Train benchmark of one model directory, run as its own process by bench.ts: the LoRA GRPO step
 * (forward + backward over the micro-batches, no optimizer update) on a deterministic random batch,
 * tokens per second, achieved GFLOP/s counted as 4 × parameters × tokens (as the PyTorch peer counts),
 * and peak memory. Writes the batch as JSON for the peer (`--write-batch FILE`) so both run the same
 * tokens. Prints one JSON object.
 *
 *   deno run -A bench/train_bench.ts --model DIR [--rows 2] [--length 256] [--rank 16] [--repeats 3]
 *     [--threads 0] [--micro-batch-tokens 4096] [--write-batch FILE]
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import type { Qwen3Config } from "../lib/model/hf_config.ts";
import { LORA_TARGET_NAMES, type LoraSpec } from "../lib/model/lora.ts";
import { openModelDir, qwen3Weights } from "../lib/model/model_dir.ts";
import { aggregationWeights, planMicroBatches, type TrainEpisode } from "../lib/train/batch.ts";
import { accumulate } from "../lib/train/step.ts";
import { Trainer } from "../lib/train/trainer.ts";
import { ADVANTAGES, OLD_LOGPROBS } from "../lib/losses/objective.ts";
import { initLoraWeights } from "../lib/model/lora.ts";
import { medianOf, peakRssMiB, resetPeakRss, timeMs } from "./measure.ts";
import { mulberry32 } from "../lib/data/random.ts";

export interface TrainBenchOptions {
  rows: number;
  length: number;
  rank: number;
  repeats: number;
  threads: number;
  microBatchTokens: number;
  writeBatch?: string;
}

/** Every parameter of the checkpoint (the tied head counted once). */
export function totalParams(cfg: Qwen3Config): number {
  return qwen3Weights(cfg).reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
}

/** `rows` episodes of `length` tokens: the first quarter is the prompt, the rest is trained on. */
export function benchEpisodes(rows: number, length: number, vocab: number): TrainEpisode[] {
  const rand = mulberry32(1234);
  return Array.from({ length: rows }, (_, i) => {
    const tokens = Int32Array.from({ length }, () => Math.floor(rand() * Math.min(vocab, 150000)));
    const prompt = Math.floor(length / 4);
    return {
      tokens,
      lossMask: Uint8Array.from(tokens, (_, t) => (t >= prompt ? 1 : 0)),
      inputs: {
        [ADVANTAGES.name]: Float32Array.from(tokens, () => (i % 2 ? -1 : 1)),
        [OLD_LOGPROBS.name]: Float32Array.from(tokens, (_, t) => (t >= prompt ? -11 - rand() : 0)),
      },
    };
  });
}

export async function benchTrain(dir: string, o: TrainBenchOptions) {
  const model = await openModelDir(dir);
  const spec: LoraSpec = { r: o.rank, alpha: 2 * o.rank, rslora: false, targets: [...LORA_TARGET_NAMES] };
  const episodes = benchEpisodes(o.rows, o.length, model.config.vocab_size);
  if (o.writeBatch) await writeBatchJson(o.writeBatch, episodes);
  resetPeakRss();
  let trainer: Trainer | undefined;
  const buildMs = await timeMs(async () => {
    trainer = await Trainer.create(model, { lora: spec, objective: "clipped", withReference: false }, {
      threads: o.threads,
    });
  });
  const params = initLoraWeights(model.config, spec, 0);
  const weights = aggregationWeights(episodes, "token_mean", o.length);
  const batches = planMicroBatches(episodes, weights, o.microBatchTokens, trainer!.maxChunk);
  const scalars = { temperature: 1, epsLow: 0.2, epsHigh: 0.2, beta: 0 };
  try {
    const seconds = await medianOf(
      o.repeats,
      async () => (await timeMs(() => accumulate(trainer!, batches, params, scalars))) / 1000,
    );
    const tokens = o.rows * o.length;
    return {
      impl: "deno-rl",
      model: dir,
      threads: o.threads,
      rank: o.rank,
      tokens_per_step: tokens,
      micro_batches: batches.length,
      build_and_load_ms: buildMs,
      seconds_per_step: seconds,
      tok_per_s: tokens / seconds,
      gflops_4n: (4 * totalParams(model.config) * tokens) / seconds / 1e9,
      peak_rss_mib: peakRssMiB(),
    };
  } finally {
    await trainer!.close();
  }
}

/** The batch in the PyTorch peer's JSON form (bench/peer_torch.py --batch). */
export async function writeBatchJson(path: string, episodes: TrainEpisode[]): Promise<void> {
  const list = (f: (e: TrainEpisode) => ArrayLike<number>) => episodes.map((e) => Array.from(f(e)));
  const body = {
    tokens: list((e) => e.tokens),
    loss_mask: list((e) => e.lossMask),
    advantages: list((e) => e.inputs[ADVANTAGES.name]),
    old_logprobs: list((e) => e.inputs[OLD_LOGPROBS.name]),
    temperature: 1,
  };
  await Deno.writeTextFile(path, JSON.stringify(body));
}

if (import.meta.main) {
  const { values } = parseArgs(Deno.args, {
    string: ["model", "rows", "length", "rank", "repeats", "threads", "micro-batch-tokens", "write-batch"],
  });
  const v = values as Record<string, string | undefined>;
  if (!v.model) throw new Error("train_bench: --model DIR is required");
  const result = await benchTrain(v.model, {
    rows: Number(v.rows ?? 2),
    length: Number(v.length ?? 256),
    rank: Number(v.rank ?? 16),
    repeats: Number(v.repeats ?? 3),
    threads: Number(v.threads ?? 0),
    microBatchTokens: Number(v["micro-batch-tokens"] ?? 4096),
    writeBatch: v["write-batch"],
  });
  console.log(JSON.stringify(result));
}
