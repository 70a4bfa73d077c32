/**
 * The demo's supervised warm start: the teacher's traces (traces.ts) trained with the `sft` loss in one
 * process — the model and its train graph are opened once and each optimizer step takes the next
 * `tracesPerStep` traces — then saved as a checkpoint the loop continues from.
 *
 * A curriculum: the first `toolOnlySteps` steps see calculator traces only, so the circuits that copy
 * the task's expression into the call and the tool's result into the answer form before anything else
 * competes for them; the remaining steps see all traces, a share `directFraction` of them answering at
 * once with a wrong number, so the starting policy often skips the calculator — the one decision GRPO
 * then has to change.
 *
 * The checkpoint is saved with a fresh optimizer state: GRPO's first steps are not scaled by the sft
 * gradients' Adam moments.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { readStageFile } from "../arrow/read.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import type { Config } from "../config/schema.ts";
import { shuffled } from "../data/random.ts";
import { initLoraWeights, type LoraSpec } from "../model/lora.ts";
import { openModelDir } from "../model/model_dir.ts";
import { sha256Hex } from "../fs/sha256.ts";
import type { TrainEpisode } from "../train/batch.ts";
import { saveCheckpoint } from "../train/checkpoint.ts";
import { episodesOf } from "../train/episodes.ts";
import { initOptimizerState } from "../train/optimizer.ts";
import { type StepMetrics, type StepSettings, trainOnBatch } from "../train/step.ts";
import { Trainer } from "../train/trainer.ts";
import type { WarmStartSettings } from "./settings.ts";
import { tracePlans, type WarmStartInputs, writeWarmStartBatches } from "./traces.ts";

export { tracePlans, type WarmStartInputs, writeWarmStartBatches, wrongAnswer } from "./traces.ts";

/** Called after each warm-start step with its number (1-based), the step count and the loss. */
export type WarmStartProgress = (step: number, steps: number, loss: number) => void;

/** What the warm start produced. */
export interface WarmStartResult {
  /** The checkpoint directory (`dir/adapter`). */
  out: string;
  /** One row per optimizer step. */
  metrics: StepMetrics[];
  seconds: number;
}

/** The traces split by plan: calculator traces and all traces, each in a seeded order. */
interface TracePools {
  tool: TrainEpisode[];
  all: TrainEpisode[];
}

/** The warm start: traces, then `settings.steps` sft steps; returns the checkpoint at `dir/adapter`. */
export async function warmStart(i: WarmStartInputs, onStep?: WarmStartProgress): Promise<WarmStartResult> {
  const started = performance.now();
  const s = i.settings;
  const batches = await Promise.all(
    (await writeWarmStartBatches(i)).map((path) => readStageFile(path, "batch")),
  );
  const pools = tracePools(i, batches);
  const { model: m, train: c } = i.config;
  const model = await openModelDir(m.path);
  const spec: LoraSpec = { ...c.lora, targets: [...c.lora.targets] };
  const weights = initLoraWeights(model.config, spec, c.seed);
  const optimizer = initOptimizerState(c.optimizer.name, weights);
  const trainer = await Trainer.create(model, {
    lora: spec,
    objective: "sft",
    withReference: false,
    ep: m.ep,
  }, {
    threads: m.threads,
  });
  const metrics: StepMetrics[] = [];
  try {
    const settings = stepSettings(i.config, s);
    for (let step = 0; step < s.steps; step++) {
      const episodes = stepTraces(pools, s, step);
      const [row] = await trainOnBatch(trainer, episodes, weights, optimizer, settings);
      metrics.push(row);
      onStep?.(step + 1, s.steps, row.loss);
    }
  } finally {
    await trainer.close();
  }
  const out = resolve(join(i.dir, "adapter"));
  const baseConfigSha256 = await sha256Hex(await Deno.readFile(join(model.dir, "config.json")));
  const fresh = initOptimizerState(c.optimizer.name, weights);
  await Deno.remove(out, { recursive: true }).catch(() => {});
  await saveCheckpoint(out, { adapter: { spec, weights }, optimizer: fresh }, model.config, {
    baseModel: model.dir,
    baseConfigSha256,
    configHash: i.configHash,
  });
  return { out, metrics, seconds: (performance.now() - started) / 1000 };
}

/** The traces of the batch files, split by their task's plan. */
function tracePools(i: WarmStartInputs, batches: StageFile[]): TracePools {
  const plans = tracePlans(i.tasks.slice(0, i.settings.traces), i.settings);
  const tool: TrainEpisode[] = [];
  const all: TrainEpisode[] = [];
  for (const batch of batches) {
    episodesOf(batch).forEach((episode, row) => {
      all.push(episode);
      if (plans.get(batch.vector("task_id").get(row) as string)?.kind === "tool") tool.push(episode);
    });
  }
  return { tool, all };
}

/**
 * The traces of optimizer step `step` (0-based): the next `tracesPerStep` of the pool the curriculum
 * names, walking through it in an order reshuffled each pass.
 */
function stepTraces(pools: TracePools, s: WarmStartSettings, step: number): TrainEpisode[] {
  const toolOnly = step < s.toolOnlySteps;
  const pool = toolOnly ? pools.tool : pools.all;
  const local = toolOnly ? step : step - s.toolOnlySteps;
  const out: TrainEpisode[] = [];
  for (let k = local * s.tracesPerStep; out.length < s.tracesPerStep; k++) {
    const pass = Math.floor(k / pool.length);
    out.push(shuffled(pool, s.seed * 1000 + pass + (toolOnly ? 0 : 500))[k % pool.length]);
  }
  return out;
}

/** One sft optimizer step per call, at the rollout's sampling temperature (docs/demo.md). */
function stepSettings(c: Config, s: WarmStartSettings): StepSettings {
  const { train: t } = c;
  return {
    aggregation: "sft",
    maxResponseTokens: c.rollout.generation.max_total_tokens,
    microBatchTokens: t.micro_batch_tokens,
    numIterations: 1,
    optimizer: t.optimizer,
    lr: s.lr,
    maxGradNorm: t.optimizer.max_grad_norm,
    schedule: { name: "cosine", warmup_steps: s.warmupSteps, min_lr_ratio: 0.1 },
    totalSteps: s.steps,
    scalars: { temperature: c.rollout.generation.temperature, epsLow: 0.2, epsHigh: 0.2, beta: 0 },
    seed: t.seed,
  };
}
