/**
 * Passes of the train graph over a batch's micro-batches: `accumulate` (one forward and backward over
 * each, summing gradients, loss parts and per-token statistics), and the passes that run once before the
 * first optimizer step: the reference log-probs with the adapter off (beta > 0) and the trainer-side old
 * log-probs with their importance weights (`train.loss.rollout_is`, rollout_is.ts).
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import {
  aggregationWeights,
  type MicroBatch,
  planMicroBatches,
  type TrainEpisode,
  unshift,
} from "./batch.ts";
import { OLD_LOGPROBS, type TokenInput } from "../losses/objective.ts";
import type { Tensors } from "./optimizer.ts";
import { correctedBatch, type RolloutIsStats, trainerLogprobs } from "./rollout_is.ts";
import type { StepMetrics, StepSettings } from "./step_types.ts";
import type { LossScalars, Trainer } from "./trainer.ts";
import { referenceInputOf } from "./algorithm.ts";
import { RETURNS } from "./value_head.ts";

/** What `accumulate` sums. */
export interface Sums {
  grads: Tensors;
  /** The value head's gradients, when the graph has one. */
  valueGrads?: Tensors;
  loss: number;
  pg: number;
  kl: number;
  clipped: number;
  entropy: number;
  maskedTokens: number;
  /** Σ weight · value loss per token (0 without a value head). */
  valueLoss: number;
  /** Σ over trained tokens of (r − 1) − log r (0 without old log-probs). */
  approxKl: number;
  /** V and R at the trained tokens, in order (empty without a value head). */
  values: number[];
  returns: number[];
}

/** Sums over micro-batches: gradients, weighted loss parts, and per-token counts for the metrics. */
export async function accumulate(
  trainer: Trainer,
  batches: readonly MicroBatch[],
  params: LoraWeights,
  scalars: LossScalars,
  valueHead?: Tensors,
): Promise<Sums> {
  const zeros = (t: Tensors) => new Map([...t].map(([k, p]) => [k, new Float32Array(p.length)]));
  const sums: Sums = {
    grads: zeros(params),
    ...(valueHead ? { valueGrads: zeros(valueHead) } : {}),
    loss: 0,
    pg: 0,
    kl: 0,
    clipped: 0,
    entropy: 0,
    maskedTokens: 0,
    valueLoss: 0,
    approxKl: 0,
    values: [],
    returns: [],
  };
  for (const mb of batches) {
    const out = await trainer.run(mb, params, scalars, { valueHead });
    addInto(sums.grads, out.grads);
    if (out.value) addInto(sums.valueGrads!, out.value.grads);
    sums.loss += out.loss;
    sums.valueLoss += out.value?.loss ?? 0;
    const old = mb.inputs[OLD_LOGPROBS.name], returns = mb.inputs[RETURNS.name];
    for (let i = 0; i < mb.weights.length; i++) {
      if (mb.weights[i] === 0) continue;
      sums.pg += mb.weights[i] * out.pg[i];
      sums.kl += mb.weights[i] * out.kl[i];
      sums.clipped += out.clipped[i];
      sums.entropy += out.entropy[i];
      sums.maskedTokens += 1;
      if (old) {
        const logRatio = out.logprobs[i] - old[i];
        sums.approxKl += Math.exp(logRatio) - 1 - logRatio;
      }
      if (out.value && returns) {
        sums.values.push(out.value.values[i]);
        sums.returns.push(returns[i]);
      }
    }
  }
  return sums;
}

function addInto(acc: Tensors, add: Map<string, Float32Array>): void {
  for (const [k, g] of add) {
    const a = acc.get(k)!;
    for (let i = 0; i < g.length; i++) a[i] += g[i];
  }
}

/** The metrics row of one optimizer step from its sums. */
export function stepRow(
  sums: Sums,
  o: { step: number; gradNorm: number; lr: number; started: number; mismatch?: RolloutIsStats },
): StepMetrics {
  const n = sums.maskedTokens;
  return {
    step: o.step,
    loss: sums.loss,
    pg_loss: sums.pg,
    kl: sums.kl,
    clip_frac: n > 0 ? sums.clipped / n : 0,
    grad_norm: o.gradNorm,
    lr: o.lr,
    tokens: n,
    seconds: (performance.now() - o.started) / 1000,
    entropy: n > 0 ? sums.entropy / n : NaN,
    ...(o.mismatch ? { rolloutIs: o.mismatch } : {}),
  };
}

/** A batch ready for its optimizer steps: reference inputs added, old log-probs corrected. */
export interface PreparedBatch {
  episodes: readonly TrainEpisode[];
  /** Aggregation weights over the whole batch, times the importance weights with `rolloutIs`. */
  weights: Float32Array[];
  /** With `rolloutIs`: each token's importance weight alone (PPO's minibatches reweigh with it). */
  importance?: Float32Array[];
  mismatch?: RolloutIsStats;
}

/** Runs the passes before the first optimizer step (reference, trainer-side old log-probs). */
export async function prepareBatch(
  trainer: Trainer,
  episodes: readonly TrainEpisode[],
  params: LoraWeights,
  s: StepSettings,
  valueHead?: Tensors,
): Promise<PreparedBatch> {
  const reference = referenceInputOf(trainer.spec);
  if (reference && s.scalars.beta > 0) {
    episodes = await withReference(trainer, reference, episodes, params, s, valueHead);
  }
  const weights = aggregationWeights(episodes, s.aggregation, s.maxResponseTokens);
  if (!s.rolloutIs) return { episodes, weights };
  const old = await trainerLogprobs(
    trainer,
    episodes,
    weights,
    params,
    s.scalars,
    s.microBatchTokens,
    valueHead,
  );
  const corrected = correctedBatch(episodes, weights, old, s.rolloutIs);
  const unit = weights.map((w) => w.map((x) => (x !== 0 ? 1 : 0)));
  return {
    episodes: corrected.episodes,
    weights: corrected.weights,
    ...(s.ppo ? { importance: correctedBatch(episodes, unit, old, s.rolloutIs).weights } : {}),
    mismatch: corrected.stats,
  };
}

/**
 * Episodes with the inputs the trainer computes from the current policy before each optimizer step
 * (`TokenInput.computed`, e.g. GSPO's sequence log-ratio): one pass of the train graph with `params`
 * gives the log-probs of every trained token (the loss mask's, whatever weight the aggregation or the
 * sampler–trainer correction gave it) they are computed from. The same episodes, and no pass, when the loss
 * has none.
 */
export async function withComputedInputs(
  trainer: Trainer,
  episodes: readonly TrainEpisode[],
  params: LoraWeights,
  s: StepSettings,
): Promise<readonly TrainEpisode[]> {
  const computed = trainer.tokenInputs.filter((i) => i.computed);
  if (computed.length === 0) return episodes;
  const trained = episodes.map((e) => Float32Array.from(e.lossMask, (m, t) => (m && t > 0 ? 1 : 0)));
  const current = await trainerLogprobs(trainer, episodes, trained, params, s.scalars, s.microBatchTokens);
  return episodes.map((e, i) => ({
    ...e,
    inputs: {
      ...e.inputs,
      ...Object.fromEntries(
        computed.map((c) => [c.name, c.computed!.fromLogprobs(current[i], e, trained[i])]),
      ),
    },
  }));
}

/**
 * Episodes with the `reference` input: the train graph's log-probs under the reference policy, the
 * adapter switched off (scale 0) or, with `s.reference`, that adapter in place of the trained one.
 */
async function withReference(
  trainer: Trainer,
  reference: TokenInput,
  episodes: readonly TrainEpisode[],
  params: LoraWeights,
  s: StepSettings,
  valueHead?: Tensors,
): Promise<TrainEpisode[]> {
  const ones = episodes.map((e) => new Float32Array(e.tokens.length).fill(1));
  const out = episodes.map((e) => ({ ...e, inputs: { ...e.inputs } }));
  for (const mb of planMicroBatches(episodes, ones, s.microBatchTokens, trainer.maxChunk)) {
    const logprobs = s.reference
      ? await trainer.logprobs(mb, s.reference, s.scalars, { valueHead })
      : await trainer.logprobs(mb, params, s.scalars, { scale: 0, valueHead });
    mb.episodes.forEach((e, row) => {
      out[e].inputs[reference.name] = unshift(logprobs, mb, row, episodes[e].tokens.length);
    });
  }
  return out;
}
