/**
 * Training on one batch. Without a value head (GRPO and its relatives): `num_iterations` optimizer
 * steps, each one pass over every micro-batch with gradients accumulated (the micro-batch weights are
 * normalized over the whole batch, so the sum is the whole batch's gradient), clipped by global norm,
 * then one optimizer update. The rollout log-probs stay fixed across the passes (GRPO's μ); the
 * reference log-probs (beta > 0) are computed once, before the first pass, with the adapter switched
 * off. With `rolloutIs` the old log-probs are recomputed by the trainer before the first pass and each
 * token's loss weight carries its importance weight (rollout_is.ts). Inputs the loss declares as computed
 * from the current policy (GSPO's sequence log-ratio) are computed before each pass, with the
 * parameters of that pass (passes.ts `withComputedInputs`). With a value head (PPO), epochs
 * over shuffled minibatches instead (ppo_step.ts).
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import { shuffled } from "../data/random.ts";
import { planMicroBatches, type TrainEpisode } from "./batch.ts";
import { clipGradNorm, type OptimizerState, optimizerStep } from "./optimizer.ts";
import type { Trainer } from "./trainer.ts";
import { accumulate, prepareBatch, stepRow, withComputedInputs } from "./passes.ts";
import { ppoTrain } from "./ppo_step.ts";
import { stepLr, type StepMetrics, type StepSettings } from "./step_types.ts";
import type { ValueState } from "./value_checkpoint.ts";

export { accumulate } from "./passes.ts";
export type { PpoMetrics, PpoSettings, StepMetrics, StepSettings } from "./step_types.ts";

/**
 * Trains `params` (and, with a value head, `value`) in place on `episodes`; returns one metrics row per
 * optimizer step.
 */
export async function trainOnBatch(
  trainer: Trainer,
  episodes: readonly TrainEpisode[],
  params: LoraWeights,
  state: OptimizerState,
  s: StepSettings,
  value?: ValueState,
): Promise<StepMetrics[]> {
  if (trainer.hasValueHead && (!value || !s.ppo)) {
    throw new Error("trainOnBatch: a graph with a value head needs the value state and PPO settings");
  }
  const batch = await prepareBatch(trainer, episodes, params, s, value?.weights);
  if (value && s.ppo) return await ppoTrain(trainer, batch, params, state, value, { ...s, ppo: s.ppo });
  const rows: StepMetrics[] = [];
  for (let pass = 0; pass < s.numIterations; pass++) {
    const started = performance.now();
    const episodesNow = await withComputedInputs(trainer, batch.episodes, params, s);
    const batches = planMicroBatches(episodesNow, batch.weights, s.microBatchTokens, trainer.maxChunk);
    const order = shuffled(batches, s.seed + state.step);
    const sums = await accumulate(trainer, order, params, s.scalars);
    const gradNorm = clipGradNorm(sums.grads, s.optimizer.max_grad_norm);
    const lr = stepLr(s, state.step + 1);
    optimizerStep(params, sums.grads, state, s.optimizer, lr);
    rows.push(stepRow(sums, { step: state.step, gradNorm, lr, started, mismatch: batch.mismatch }));
    s.onStep?.(rows[rows.length - 1]);
  }
  return rows;
}
