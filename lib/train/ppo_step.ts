/**
 * PPO's optimizer steps on one batch (an algorithm with a value head: mask.estimator gae), as seed 002
 * trains: `ppo_epochs` epochs, each over the batch's episodes in a freshly shuffled order, cut into
 * minibatches of `minibatch_episodes` episodes; each minibatch is one optimizer step of the LoRA adapter
 * and of the value head, on the clipped policy loss plus vf_coef × the value loss (value_head.ts).
 *
 * Per minibatch: the aggregation weights are computed over the minibatch (so each step's loss is that
 * minibatch's mean, as seed 002's), times the importance weights with `rollout_is`; its micro-batches'
 * gradients are summed; approx-KL (mean of (r − 1) − log r over its trained tokens, before the step) is
 * checked against `target_kl`: above 1.5 × target_kl the step is not taken and the remaining epochs are
 * skipped (Stable-Baselines3's rule); else the LoRA gradients and the value head's are each clipped to
 * `max_grad_norm` (seed 002 clips the two parameter groups separately) and each optimizer steps, the
 * value head's at `train.value.lr` scaled by the same schedule as the policy's learning rate.
 *
 * The episode order and the micro-batch order are seeded by (train.seed, the optimizer step), which the
 * checkpoint stores, so a resumed run repeats an uninterrupted one.
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import { shuffled } from "../data/random.ts";
import { aggregationWeights, planMicroBatches } from "./batch.ts";
import { clipGradNorm, type OptimizerState, optimizerStep } from "./optimizer.ts";
import { accumulate, type PreparedBatch, stepRow, type Sums } from "./passes.ts";
import {
  type PpoMetrics,
  type PpoSettings,
  stepLr,
  type StepMetrics,
  type StepSettings,
} from "./step_types.ts";
import type { Trainer } from "./trainer.ts";
import type { ValueState } from "./value_checkpoint.ts";

/** The episodes of each minibatch of one epoch, in the order the epoch visits them. */
export function minibatches(episodes: number, size: number, seed: number): number[][] {
  const order = shuffled(Array.from({ length: episodes }, (_, i) => i), seed);
  const out: number[][] = [];
  for (let k = 0; k < order.length; k += size) out.push(order.slice(k, k + size));
  return out;
}

/** PPO's steps on `batch`; updates `params`, `state` and `value` in place; one metrics row per step. */
export async function ppoTrain(
  trainer: Trainer,
  batch: PreparedBatch,
  params: LoraWeights,
  state: OptimizerState,
  value: ValueState,
  s: StepSettings & { ppo: PpoSettings },
): Promise<StepMetrics[]> {
  const rows: StepMetrics[] = [];
  for (let epoch = 1; epoch <= s.ppo.epochs; epoch++) {
    for (const members of minibatches(batch.episodes.length, s.ppo.minibatchEpisodes, s.seed + state.step)) {
      const started = performance.now();
      const sums = await minibatchSums(trainer, batch, members, params, value, s, state.step);
      const approxKl = sums.maskedTokens > 0 ? sums.approxKl / sums.maskedTokens : 0;
      if (s.ppo.targetKl !== null && approxKl > 1.5 * s.ppo.targetKl) return rows; // early stop
      const gradNorm = clipGradNorm(sums.grads, s.optimizer.max_grad_norm);
      const valueGradNorm = clipGradNorm(sums.valueGrads!, s.optimizer.max_grad_norm);
      const lr = stepLr(s, state.step + 1);
      optimizerStep(params, sums.grads, state, s.optimizer, lr);
      optimizerStep(
        value.weights,
        sums.valueGrads!,
        value.optimizer,
        s.optimizer,
        lr * s.ppo.valueLr / s.optimizer.lr,
      );
      const row = stepRow(sums, { step: state.step, gradNorm, lr, started, mismatch: batch.mismatch });
      rows.push({ ...row, ppo: ppoMetrics(sums, { approxKl, valueGradNorm, epoch }) });
      s.onStep?.(rows[rows.length - 1]);
    }
  }
  return rows;
}

/** Forward and backward over one minibatch, its aggregation weights computed over its own episodes. */
async function minibatchSums(
  trainer: Trainer,
  batch: PreparedBatch,
  members: number[],
  params: LoraWeights,
  value: ValueState,
  s: StepSettings,
  step: number,
): Promise<Sums> {
  const episodes = members.map((i) => batch.episodes[i]);
  const weights = aggregationWeights(episodes, s.aggregation, s.maxResponseTokens);
  if (batch.importance) {
    members.forEach((i, k) => weights[k].forEach((w, t, a) => (a[t] = w * batch.importance![i][t])));
  }
  const micro = planMicroBatches(episodes, weights, s.microBatchTokens, trainer.maxChunk);
  return await accumulate(trainer, shuffled(micro, s.seed + step), params, s.scalars, value.weights);
}

/** The value head's metrics of one step from its sums (V before the step). */
function ppoMetrics(
  sums: Sums,
  o: { approxKl: number; valueGradNorm: number; epoch: number },
): PpoMetrics {
  const { values: v, returns: r } = sums;
  const mean = (x: number[]) => x.reduce((a, b) => a + b, 0) / x.length;
  const variance = (x: number[]) => {
    const m = mean(x);
    return x.reduce((a, b) => a + (b - m) ** 2, 0) / x.length;
  };
  const varR = r.length ? variance(r) : NaN;
  return {
    value_loss: sums.valueLoss,
    approx_kl: o.approxKl,
    explained_var: varR > 0 ? 1 - variance(r.map((x, i) => x - v[i])) / varR : NaN,
    value_mean: v.length ? mean(v) : NaN,
    value_grad_norm: o.valueGradNorm,
    epoch: o.epoch,
  };
}
