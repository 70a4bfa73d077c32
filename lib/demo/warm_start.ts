/**
 * The demo's supervised warm start: the teacher's traces (traces.ts) trained with the `sft` loss by the
 * pipeline's train stage, one optimizer step per call on the next `tracesPerStep` traces, all in one
 * session (the model and its train graph are opened once) — then saved as a checkpoint the loop
 * continues from.
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
import { type CheckpointOutput, train, type TrainSummary, writeStageOutput } from "../pipeline/mod.ts";
import type { StepMetrics } from "../train/step.ts";
import { initOptimizerState } from "../train/optimizer.ts";
import type { WarmStartSettings } from "./settings.ts";
import { tracePlans, type WarmStartInputs, writeWarmStartBatch } from "./traces.ts";

export { tracePlans, type WarmStartInputs, writeWarmStartBatch, wrongAnswer } from "./traces.ts";

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

/** The trace rows split by plan: calculator traces and all traces. */
interface TracePools {
  tool: number[];
  all: number[];
}

/**
 * The run's configuration as the warm start trains: the `sft` loss, its own learning rate with a linear
 * warm-up and a cosine decay to a tenth over its `steps`, one optimizer step per batch.
 */
export function warmStartConfig(config: Config, s: WarmStartSettings): Config {
  const { train: t } = config;
  return {
    ...config,
    train: {
      ...t,
      num_iterations: 1,
      optimizer: { ...t.optimizer, lr: s.lr },
      schedule: { name: "cosine", warmup_steps: s.warmupSteps, min_lr_ratio: 0.1 },
      loss: {
        ...t.loss,
        objective: "sft",
        aggregation: "token_mean",
        eps_low: 0.2,
        eps_high: 0.2,
        beta: 0,
        rollout_is: "none",
      },
    },
    loop: { ...config.loop, steps: s.steps },
  };
}

/** The warm start: traces, then `settings.steps` sft steps; returns the checkpoint at `dir/adapter`. */
export async function warmStart(i: WarmStartInputs, onStep?: WarmStartProgress): Promise<WarmStartResult> {
  const started = performance.now();
  const s = i.settings;
  const batch = await readStageFile(await writeWarmStartBatch(i), "batch");
  const pools = tracePools(i, batch);
  const metrics: StepMetrics[] = [];
  let last: CheckpointOutput<TrainSummary> | undefined;
  for (let step = 0; step < s.steps; step++) {
    last = await train(i.session, batch, { step, rows: stepRows(pools, s, step) });
    metrics.push(...last.summary.metrics);
    onStep?.(step + 1, s.steps, last.summary.metrics[0].loss);
  }
  if (!last) throw new RangeError("warm start: settings.steps must be at least 1");
  const out = resolve(join(i.dir, "adapter"));
  const { state } = last.checkpoint;
  const fresh = initOptimizerState(state.optimizer.name, state.adapter.weights);
  await writeStageOutput(out, {
    ...last,
    checkpoint: { ...last.checkpoint, state: { ...state, optimizer: fresh } },
  });
  return { out, metrics, seconds: (performance.now() - started) / 1000 };
}

/** The rows of the trace batch, split by their task's plan. */
function tracePools(i: WarmStartInputs, batch: StageFile): TracePools {
  const plans = tracePlans(i.tasks.slice(0, i.settings.traces), i.settings);
  const taskIds = batch.vector("task_id");
  const all = Array.from({ length: batch.rows }, (_, row) => row);
  const tool = all.filter((row) => plans.get(taskIds.get(row) as string)?.kind === "tool");
  return { tool, all };
}

/**
 * The rows of optimizer step `step` (0-based): the next `tracesPerStep` of the pool the curriculum
 * names, walking through it in an order reshuffled each pass.
 */
function stepRows(pools: TracePools, s: WarmStartSettings, step: number): number[] {
  const toolOnly = step < s.toolOnlySteps;
  const pool = toolOnly ? pools.tool : pools.all;
  const local = toolOnly ? step : step - s.toolOnlySteps;
  const out: number[] = [];
  for (let k = local * s.tracesPerStep; out.length < s.tracesPerStep; k++) {
    const pass = Math.floor(k / pool.length);
    out.push(shuffled(pool, s.seed * 1000 + pass + (toolOnly ? 0 : 500))[k % pool.length]);
  }
  return out;
}
