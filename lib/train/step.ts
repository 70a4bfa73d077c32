/**
 * Training on one batch: `num_iterations` optimizer steps, each one pass over every micro-batch with
 * gradients accumulated (the micro-batch weights are normalized over the whole batch, so the sum is
 * the whole batch's gradient), clipped by global norm, then one optimizer update. The rollout
 * log-probs stay fixed across the passes (GRPO's μ); the reference log-probs (beta > 0) are computed
 * once, before the first pass, with the adapter switched off. With `rolloutIs` the old log-probs are
 * recomputed by the trainer before the first pass and each token's loss weight carries its importance
 * weight (rollout_is.ts).
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import { shuffled } from "../data/random.ts";
import {
  type Aggregation,
  aggregationWeights,
  type MicroBatch,
  planMicroBatches,
  type TrainEpisode,
  unshift,
} from "./batch.ts";
import {
  clipGradNorm,
  type OptimizerConfig,
  type OptimizerState,
  optimizerStep,
  type ScheduleConfig,
  scheduledLr,
} from "./optimizer.ts";
import type { LossScalars, Trainer } from "./trainer.ts";
import { correctedBatch, type RolloutIs, type RolloutIsStats, trainerLogprobs } from "./rollout_is.ts";
import type { TokenInput } from "./objective.ts";
import { referenceInputOf } from "./algorithm.ts";

/** The train settings a batch needs (`train` in config.yaml, plus the sampling temperature). */
export interface StepSettings {
  aggregation: Aggregation;
  maxResponseTokens: number;
  microBatchTokens: number;
  numIterations: number;
  /** The optimizer, its learning rate and gradient clipping (`train.optimizer`). */
  optimizer: OptimizerConfig;
  schedule: ScheduleConfig;
  /** Optimizer steps of the whole run, for the schedule. */
  totalSteps: number;
  scalars: LossScalars;
  /** Seed of the micro-batch order. */
  seed: number;
  /** Trainer-side old log-probs with this importance-sampling correction (absent: `none`). */
  rolloutIs?: RolloutIs;
  /** Called with each optimizer step's metrics as soon as the step finishes (progress lines). */
  onStep?: (metrics: StepMetrics) => void;
}

/** One metrics row (metrics.arrow). */
export interface StepMetrics {
  step: number;
  loss: number;
  pg_loss: number;
  kl: number;
  clip_frac: number;
  grad_norm: number;
  lr: number;
  tokens: number;
  seconds: number;
  entropy: number;
  /** With `rolloutIs`: the batch's train/inference mismatch (the same in every step of the batch). */
  rolloutIs?: RolloutIsStats;
}

/** Trains `params` in place on `episodes`; returns one metrics row per optimizer step. */
export async function trainOnBatch(
  trainer: Trainer,
  episodes: readonly TrainEpisode[],
  params: LoraWeights,
  state: OptimizerState,
  s: StepSettings,
): Promise<StepMetrics[]> {
  const reference = referenceInputOf(trainer.spec);
  if (reference && s.scalars.beta > 0) {
    episodes = await withReference(trainer, reference, episodes, params, s);
  }
  let weights = aggregationWeights(episodes, s.aggregation, s.maxResponseTokens);
  let mismatch: RolloutIsStats | undefined;
  if (s.rolloutIs) {
    const old = await trainerLogprobs(trainer, episodes, weights, params, s.scalars, s.microBatchTokens);
    ({ episodes, weights, stats: mismatch } = correctedBatch(episodes, weights, old, s.rolloutIs));
  }
  const batches = planMicroBatches(episodes, weights, s.microBatchTokens, trainer.maxChunk);
  const rows: StepMetrics[] = [];
  for (let pass = 0; pass < s.numIterations; pass++) {
    const started = performance.now();
    const order = shuffled(batches, s.seed + state.step);
    const sums = await accumulate(trainer, order, params, s.scalars);
    const gradNorm = clipGradNorm(sums.grads, s.optimizer.max_grad_norm);
    const lr = scheduledLr(s.optimizer.lr, state.step + 1, s.totalSteps, s.schedule);
    optimizerStep(params, sums.grads, state, s.optimizer, lr);
    rows.push({
      step: state.step,
      loss: sums.loss,
      pg_loss: sums.pg,
      kl: sums.kl,
      clip_frac: sums.maskedTokens > 0 ? sums.clipped / sums.maskedTokens : 0,
      grad_norm: gradNorm,
      lr,
      tokens: sums.maskedTokens,
      seconds: (performance.now() - started) / 1000,
      entropy: sums.maskedTokens > 0 ? sums.entropy / sums.maskedTokens : NaN,
      ...(mismatch ? { rolloutIs: mismatch } : {}),
    });
    s.onStep?.(rows[rows.length - 1]);
  }
  return rows;
}

/** Sums over micro-batches: gradients, weighted loss parts, and per-token counts for the metrics. */
export async function accumulate(
  trainer: Trainer,
  batches: readonly MicroBatch[],
  params: LoraWeights,
  scalars: LossScalars,
) {
  const grads = new Map([...params].map(([k, p]) => [k, new Float32Array(p.length)]));
  const sums = { grads, loss: 0, pg: 0, kl: 0, clipped: 0, entropy: 0, maskedTokens: 0 };
  for (const mb of batches) {
    const out = await trainer.run(mb, params, scalars);
    for (const [k, g] of out.grads) {
      const acc = grads.get(k)!;
      for (let i = 0; i < g.length; i++) acc[i] += g[i];
    }
    sums.loss += out.loss;
    for (let i = 0; i < mb.weights.length; i++) {
      if (mb.weights[i] === 0) continue;
      sums.pg += mb.weights[i] * out.pg[i];
      sums.kl += mb.weights[i] * out.kl[i];
      sums.clipped += out.clipped[i];
      sums.entropy += out.entropy[i];
      sums.maskedTokens += 1;
    }
  }
  return sums;
}

/** Episodes with the `reference` input: the train graph's log-probs with the adapter off (scale 0). */
async function withReference(
  trainer: Trainer,
  reference: TokenInput,
  episodes: readonly TrainEpisode[],
  params: LoraWeights,
  s: StepSettings,
): Promise<TrainEpisode[]> {
  const ones = episodes.map((e) => new Float32Array(e.tokens.length).fill(1));
  const out = episodes.map((e) => ({ ...e, inputs: { ...e.inputs } }));
  for (const mb of planMicroBatches(episodes, ones, s.microBatchTokens, trainer.maxChunk)) {
    const result = await trainer.run(mb, params, s.scalars, 0);
    mb.episodes.forEach((e, row) => {
      out[e].inputs[reference.name] = unshift(result.logprobs, mb, row, episodes[e].tokens.length);
    });
  }
  return out;
}
