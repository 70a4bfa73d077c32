/**
 * Trainer-side old log-probs with truncated importance sampling (`train.loss.rollout_is`), for
 * rollouts sampled by another engine (vLLM, SGLang, or our own server) whose log-probs differ from the
 * trainer's by kernels, precision and batching: the train/inference mismatch.
 *
 * Before the first optimizer pass, one forward pass of the train graph with the adapter being
 * continued (the one the batch was sampled with) gives `old_trainer` per token. Then, per trained token t
 * of episode i:
 *
 *   δ_t = old_trainer − old_rollout
 *   token level:     ρ_t = exp(δ_t)                    the trainer's probability over the sampler's
 *   sequence level:  ρ_t = exp(Σ_{u trained in i} δ_u)  the same for every token of the episode
 *   r   = exp(lp − old_trainer)                        the PPO ratio now uses the trainer's old
 *   truncate:  w = min(ρ, C)                           (TIS: truncated importance sampling)
 *   mask:      w = ρ · [ρ ≤ C]                         (tokens or episodes whose ρ exceeds C are dropped)
 *   l'  = w · l                                        w is multiplied into the token's loss weight
 *
 * When the two agree (δ = 0, our CPU loop: one engine for both), ρ = 1 exactly, w = 1, and training is
 * bit-identical to the correction off (tests/train/rollout_is_test.ts).
 *
 * `w` carries no gradient (a constant per token, like the aggregation weight it multiplies), so the
 * graph is unchanged: the correction enters through the existing per-token weight input (batch.ts).
 * Logged per step: mean |δ| over the trained tokens, the k3 estimate of KL(sampler ‖ trainer) over them
 * (mean of ρ_t − 1 − log ρ_t with the token-level ρ_t, whatever the level), and the fraction of them whose
 * ρ exceeded C (clipped by `truncate`, dropped by `mask`; at the sequence level every token of such an
 * episode counts).
 *
 * As TRL's `vllm_importance_sampling_mode` (token_truncate, token_mask, sequence_truncate, sequence_mask:
 * ours are `train.loss.rollout_is` × `rollout_is_level`; TRL's default sequence_mask with C = 3 is ours) and
 * verl's `rollout_is` (token or sequence level, truncate or mask). Deviations: only the upper bound C (no
 * lower threshold, no geometric-mean level); the recomputation is `Trainer.logprobs`, the train graph's
 * forward alone on the CPU over shared weights and on WebGPU, the whole graph elsewhere (its gradients discarded);
 * tokens the rollout did not sample never count (their loss weight is already 0).
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import { planMicroBatches, type TrainEpisode, unshift } from "./batch.ts";
import { OLD_LOGPROBS } from "../losses/objective.ts";
import type { Tensors } from "./optimizer.ts";
import type { LossScalars, Trainer } from "./trainer.ts";

export type RolloutIsMode = "none" | "truncate" | "mask";
export type RolloutIsLevel = "token" | "sequence";

/**
 * The correction as configured (`train.loss.rollout_is`, `train.loss.rollout_is_level`,
 * `train.loss.rollout_is_cap`).
 */
export interface RolloutIs {
  mode: Exclude<RolloutIsMode, "none">;
  /** Per token, or one ratio per episode (default token, the rule before levels existed). */
  level?: RolloutIsLevel;
  /** C: the largest importance weight kept. */
  cap: number;
}

/**
 * The mismatch of one batch (metrics.arrow columns `rollout_logprob_diff`, `rollout_kl`,
 * `rollout_is_clip_frac`).
 */
export interface RolloutIsStats {
  /** Mean |old_trainer − old_rollout| over the trained tokens. */
  rollout_logprob_diff: number;
  /** Mean over the trained tokens of ρ_t − 1 − log ρ_t: the k3 estimate of KL(sampler ‖ trainer). */
  rollout_kl: number;
  /** Fraction of trained tokens whose ρ (their own, or their episode's) exceeded C. */
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
    const logprobs = await trainer.logprobs(mb, params, scalars, { valueHead });
    mb.episodes.forEach((e, row) => (out[e] = unshift(logprobs, mb, row, episodes[e].tokens.length)));
  }
  return out;
}

/**
 * The corrected batch: episodes whose old log-probs are `oldTrainer`, loss weights multiplied by the
 * importance weights of `rule.mode` at `rule.level`, and the mismatch statistics. Tokens with weight 0
 * stay 0.
 */
export function correctedBatch(
  episodes: readonly TrainEpisode[],
  weights: readonly Float32Array[],
  oldTrainer: readonly Float32Array[],
  rule: RolloutIs,
): { episodes: TrainEpisode[]; weights: Float32Array[]; stats: RolloutIsStats } {
  const weightOf = RULES[rule.mode];
  let tokens = 0, absDiff = 0, kl = 0, over = 0;
  const corrected = episodes.map((e, i) => {
    const diff = (t: number) => oldTrainer[i][t] - e.inputs[OLD_LOGPROBS.name][t];
    const sequence = rule.level === "sequence" ? Math.exp(sumOver(weights[i], diff)) : undefined;
    return Float32Array.from(weights[i], (w, t) => {
      if (w === 0) return 0;
      const rhoToken = Math.exp(diff(t));
      const rho = sequence ?? rhoToken;
      tokens += 1;
      absDiff += Math.abs(diff(t));
      kl += rhoToken - 1 - diff(t);
      if (rho > rule.cap) over += 1;
      return w * weightOf(rho, rule.cap);
    });
  });
  return {
    episodes: episodes.map((e, i) => ({
      ...e,
      inputs: { ...e.inputs, [OLD_LOGPROBS.name]: withZeros(oldTrainer[i]) },
    })),
    weights: corrected,
    stats: {
      rollout_logprob_diff: tokens > 0 ? absDiff / tokens : 0,
      rollout_kl: tokens > 0 ? kl / tokens : 0,
      rollout_is_clip_frac: tokens > 0 ? over / tokens : 0,
    },
  };
}

/** Σ f(t) over the tokens with loss weight. */
function sumOver(weights: Float32Array, f: (t: number) => number): number {
  let sum = 0;
  for (let t = 0; t < weights.length; t++) if (weights[t] !== 0) sum += f(t);
  return sum;
}

/** NaN (tokens the head did not compute, which carry no weight) as 0, so no NaN reaches the graph. */
function withZeros(values: Float32Array): Float32Array {
  return values.map((v) => (Number.isNaN(v) ? 0 : v));
}
