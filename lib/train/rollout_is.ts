/**
 * Trainer-side old log-probs with truncated importance sampling (`train.loss.rollout_is`), for
 * rollouts sampled by another engine (vLLM, SGLang, or our own server) whose log-probs differ from the
 * trainer's by kernels, precision and batching: the train/inference mismatch.
 *
 * Before the first optimizer pass, one forward pass of the train graph with the adapter being
 * continued (the one the batch was sampled with) gives `old_trainer` per token. Then, per trained token:
 *
 *   ρ   = exp(old_trainer − old_rollout)              the trainer's probability over the sampler's
 *   r   = exp(lp − old_trainer)                        the PPO ratio now uses the trainer's old
 *   truncate:  w = min(ρ, C)                           (TIS: truncated importance sampling)
 *   mask:      w = ρ · [ρ ≤ C]                         (tokens whose ρ exceeds C are dropped)
 *   l'  = w · l                                        w is multiplied into the token's loss weight
 *
 * `w` carries no gradient (a constant per token, like the aggregation weight it multiplies), so the
 * graph is unchanged: the correction enters through the existing per-token weight input (batch.ts).
 * Logged per step: mean |old_trainer − old_rollout| over the trained tokens, and the fraction of them
 * whose ρ exceeded C (clipped by `truncate`, dropped by `mask`).
 *
 * As in verl's `rollout_is` (token level, `truncate` / `mask` with an upper threshold) and TRL's
 * `vllm_importance_sampling_cap`. Deviations: only the upper bound C (no lower threshold, no sequence
 * level); the recomputation runs the train graph, which computes gradients too (they are discarded),
 * so it costs a forward and a backward rather than a forward alone; tokens the rollout did not sample
 * never count (their loss weight is already 0).
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import { planMicroBatches, type TrainEpisode, unshift } from "./batch.ts";
import { OLD_LOGPROBS } from "../losses/objective.ts";
import type { Tensors } from "./optimizer.ts";
import type { LossScalars, Trainer } from "./trainer.ts";

export type RolloutIsMode = "none" | "truncate" | "mask";

/** The correction as configured (`train.loss.rollout_is`, `train.loss.rollout_is_cap`). */
export interface RolloutIs {
  mode: Exclude<RolloutIsMode, "none">;
  /** C: the largest importance weight kept. */
  cap: number;
}

/** The mismatch of one batch (metrics.arrow columns `rollout_logprob_diff`, `rollout_is_clip_frac`). */
export interface RolloutIsStats {
  /** Mean |old_trainer − old_rollout| over the trained tokens. */
  rollout_logprob_diff: number;
  /** Fraction of trained tokens with ρ > C. */
  rollout_is_clip_frac: number;
}

/** The weight of one token from its importance ratio ρ and the cap C. */
type WeightRule = (rho: number, cap: number) => number;

const RULES: Record<RolloutIs["mode"], WeightRule> = {
  truncate: (rho, cap) => Math.min(rho, cap),
  mask: (rho, cap) => (rho > cap ? 0 : rho),
};

/**
 * `old_trainer` of every episode: the train graph's log-probs with `params` at the run's temperature,
 * for the tokens that carry loss weight (NaN elsewhere). A graph with a value head needs its tensors.
 */
export async function trainerLogprobs(
  trainer: Trainer,
  episodes: readonly TrainEpisode[],
  weights: readonly Float32Array[],
  params: LoraWeights,
  scalars: LossScalars,
  microBatchTokens: number,
  valueHead?: Tensors,
): Promise<Float32Array[]> {
  const out: Float32Array[] = episodes.map((e) => new Float32Array(e.tokens.length).fill(NaN));
  for (const mb of planMicroBatches(episodes, weights, microBatchTokens, trainer.maxChunk)) {
    const result = await trainer.run(mb, params, scalars, { valueHead });
    mb.episodes.forEach((e, row) => (out[e] = unshift(result.logprobs, mb, row, episodes[e].tokens.length)));
  }
  return out;
}

/**
 * The corrected batch: episodes whose old log-probs are `oldTrainer`, loss weights multiplied by the
 * importance weights of `rule.mode`, and the mismatch statistics. Tokens with weight 0 stay 0.
 */
export function correctedBatch(
  episodes: readonly TrainEpisode[],
  weights: readonly Float32Array[],
  oldTrainer: readonly Float32Array[],
  rule: RolloutIs,
): { episodes: TrainEpisode[]; weights: Float32Array[]; stats: RolloutIsStats } {
  const weightOf = RULES[rule.mode];
  let tokens = 0, absDiff = 0, over = 0;
  const corrected = episodes.map((e, i) =>
    Float32Array.from(weights[i], (w, t) => {
      if (w === 0) return 0;
      const diff = oldTrainer[i][t] - e.inputs[OLD_LOGPROBS.name][t];
      const rho = Math.exp(diff);
      tokens += 1;
      absDiff += Math.abs(diff);
      if (rho > rule.cap) over += 1;
      return w * weightOf(rho, rule.cap);
    })
  );
  return {
    episodes: episodes.map((e, i) => ({
      ...e,
      inputs: { ...e.inputs, [OLD_LOGPROBS.name]: withZeros(oldTrainer[i]) },
    })),
    weights: corrected,
    stats: {
      rollout_logprob_diff: tokens > 0 ? absDiff / tokens : 0,
      rollout_is_clip_frac: tokens > 0 ? over / tokens : 0,
    },
  };
}

/** NaN (tokens the head did not compute, which carry no weight) as 0, so no NaN reaches the graph. */
function withZeros(values: Float32Array): Float32Array {
  return values.map((v) => (Number.isNaN(v) ? 0 : v));
}
