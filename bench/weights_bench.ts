/**
 * Memory of the loop's process, run as its own process by bench.ts: the policy in its Worker and the
 * trainer both open, then `steps` times a batch of decoding (as a rollout does) and a train step (the
 * LoRA GRPO step of train_bench.ts on the same batch: forward + backward, no optimizer update). Peak RSS
 * (VmHWM) of the whole process, decode ms/step and train s/step (medians over the steps), and how
 * long opening took. Prints one JSON object.
 *
 *   deno run -A bench/weights_bench.ts --model DIR [--weights separate|shared] [--steps 3] [--rows 2]
 *     [--length 256] [--rank 16] [--decode-batch 8] [--decode 16] [--threads 0] [--write-batch FILE]
 *
 * `separate`: each session folds its own float32 copy of the weights (as before shared weights);
 * `shared`: one copy loaded by `loadSharedWeights`, given to both sessions (lib/model/shared_weights.ts).
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { loadPolicy } from "../lib/engine/worker_policy.ts";
import { initLoraWeights, LORA_TARGET_NAMES, type LoraSpec } from "../lib/model/lora.ts";
import { openModelDir } from "../lib/model/model_dir.ts";
import { loadSharedWeights, type SharedWeights } from "../lib/model/shared_weights.ts";
import { aggregationWeights, planMicroBatches } from "../lib/train/batch.ts";
import { accumulate } from "../lib/train/step.ts";
import { Trainer } from "../lib/train/trainer.ts";
import { median, peakRssMiB, rssMiB, timeMs } from "./measure.ts";
import { benchEpisodes, writeBatchJson } from "./train_bench.ts";

export interface WeightsBenchOptions {
  weights: "separate" | "shared";
  steps: number;
  rows: number;
  length: number;
  rank: number;
  decodeBatch: number;
  decodeTokens: number;
  threads: number;
  writeBatch?: string;
}

export async function benchWeights(dir: string, o: WeightsBenchOptions) {
  const model = await openModelDir(dir);
  const lora: LoraSpec = { r: o.rank, alpha: 2 * o.rank, rslora: false, targets: [...LORA_TARGET_NAMES] };
  const episodes = benchEpisodes(o.rows, o.length, model.config.vocab_size);
  if (o.writeBatch) await writeBatchJson(o.writeBatch, episodes);
  let sharedWeights: SharedWeights | undefined;
  const loadMs = await timeMs(async () => {
    if (o.weights === "shared") sharedWeights = await loadSharedWeights(model);
  });
  const options = { lora, threads: o.threads, sharedWeights };
  const opened = performance.now();
  const policy = await loadPolicy(dir, options);
  const trainer = await Trainer.create(model, { lora, objective: "clipped", withReference: false }, options);
  const openMs = performance.now() - opened;
  const rssOpen = rssMiB();
  const params = initLoraWeights(model.config, lora, 0);
  const weights = aggregationWeights(episodes, "token_mean", o.length);
  const batches = planMicroBatches(episodes, weights, 4096, trainer.maxChunk);
  const scalars = { temperature: 1, epsLow: 0.2, epsHigh: 0.2, beta: 0 };
  const decodeMs: number[] = [];
  const trainS: number[] = [];
  try {
    for (let step = 0; step < o.steps; step++) {
      const prompts = Array.from(
        { length: o.decodeBatch },
        (_, b) => Array.from({ length: 64 }, (_, t) => (step * 31 + b * 7919 + t * 104729) % 150000),
      );
      const batch = await policy.startBatch(prompts, { capacity: 64 + o.decodeTokens + 1 });
      await batch.generate({ maxNewTokens: o.decodeTokens, temperature: 0 });
      const stats = await batch.stats();
      await batch.close();
      decodeMs.push(stats.decodeMs / stats.decodeSteps);
      trainS.push((await timeMs(() => accumulate(trainer, batches, params, scalars))) / 1000);
    }
  } finally {
    await trainer.close();
    await policy.close();
  }
  return {
    impl: "deno-rl",
    weights: o.weights,
    model: dir,
    threads: o.threads,
    rank: o.rank,
    tokens_per_step: o.rows * o.length,
    steps: o.steps,
    shared_load_ms: loadMs,
    sessions_open_ms: openMs,
    rss_sessions_open_mib: rssOpen,
    decode_batch: o.decodeBatch,
    decode_tokens: o.decodeTokens,
    decode_ms_per_step: median(decodeMs),
    train_seconds_per_step: median(trainS),
    train_seconds: trainS,
    peak_rss_mib: peakRssMiB(),
  };
}

if (import.meta.main) {
  const { values } = parseArgs(Deno.args, {
    string: [
      "model",
      "weights",
      "steps",
      "rows",
      "length",
      "rank",
      "decode-batch",
      "decode",
      "threads",
      "write-batch",
    ],
  });
  const v = values as Record<string, string | undefined>;
  if (!v.model) throw new Error("weights_bench: --model DIR is required");
  const weights = v.weights ?? "shared";
  if (weights !== "separate" && weights !== "shared") {
    throw new Error(`weights_bench: --weights ${weights}; use separate or shared`);
  }
  const result = await benchWeights(v.model, {
    weights,
    steps: Number(v.steps ?? 3),
    rows: Number(v.rows ?? 2),
    length: Number(v.length ?? 256),
    rank: Number(v.rank ?? 16),
    decodeBatch: Number(v["decode-batch"] ?? 8),
    decodeTokens: Number(v.decode ?? 16),
    threads: Number(v.threads ?? 0),
    writeBatch: v["write-batch"],
  });
  console.log(JSON.stringify(result));
}
