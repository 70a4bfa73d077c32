/**
 * The policy losses' shared parts (the declared inputs, PPO's clip, the k3 KL term) and the two first
 * losses of docs/DESIGN.md ("The objective"); the records that pick a loss by name
 * (`train.loss.objective`) are in policy_losses.ts, never an `if` inside a loss. Each record declares the
 * per-token inputs it reads (a batch column → a train-graph input, or one the trainer computes) and
 * builds its per-token loss as a graph composition; the batch builder, the micro-batches, the train
 * graph's inputs and the trainer's feeds loop over those declarations (algorithm.ts), so no file of the
 * trainer names them. GSPO is gspo.ts, CISPO cispo.ts.
 *
 *   clipped:  r   = exp(lp - old)
 *             pg  = -min(r · A, clip(r, 1 - eps_low, 1 + eps_high) · A)
 *             kl  = exp(ref - lp) - (ref - lp) - 1          (k3; only when beta > 0)
 *             l   = pg + beta · kl
 *   sft:      l   = -lp                                     (supervised warm start)
 *
 * The aggregation (token_mean, seq_mean_token_mean, seq_mean_token_sum_norm) is a per-token weight
 * computed over the whole optimizer batch before the micro-batches run (batch.ts), so the loss of a
 * micro-batch is `Σ weight · l` and micro-batch gradients add up to the whole batch's.
 *
 * Names: `clipped` is PPO's clipped surrogate as GRPO, Dr. GRPO, RLOO and PPO use it (verl's policy loss
 * mode "vanilla"); `sft` is TRL's name for supervised fine-tuning.
 *
 * Deviations from the papers: none in the formula. As in TRL and verl, the gradient through `min` and
 * `clip` is the subgradient autodiff gives (zero where the clipped branch is selected and r is outside
 * the range).
 *
 * Dimension legend: C tokens of a chunk.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../onnx/builder.ts";
import type { TrainEpisode } from "./batch.ts";
import { OPS } from "../onnx/ops.ts";

const { Add, And, Cast, Exp, Greater, Less, Max, Min, Mul, Neg, Sub, Where } = OPS;

/**
 * A per-token input of the train graph. `name` is its graph input and the key of its per-token array in
 * training episodes and micro-batches; `column` is the batch column it is read from, or null for one the
 * trainer computes itself (the reference log-probs, from a pass with the adapter off).
 */
export interface TokenInput {
  name: string;
  column: string | null;
  doc: string;
  /**
   * For an input the trainer computes from the current policy before each optimizer step (GSPO's
   * sequence log-ratio): its per-token values from the episode's current log-probs (NaN where the head
   * did not compute one) and its loss weights (0 off the trained tokens). step.ts runs it.
   */
  computed?: {
    each: "optimizer step";
    fromLogprobs(logprobs: Float32Array, episode: TrainEpisode, weights: Float32Array): Float32Array;
  };
}

/** The rollout's log-probs, the "old" policy of the ratio. */
export const OLD_LOGPROBS: TokenInput = {
  name: "old_logprobs",
  column: "logprobs",
  doc: "rollout log-probs (the old policy of the ratio)",
};
/** The mask stage's per-token advantages. */
export const ADVANTAGES: TokenInput = {
  name: "advantages",
  column: "advantages",
  doc: "per-token advantage",
};
/** The base model's log-probs (adapter off), computed by the trainer when beta > 0. */
export const REF_LOGPROBS: TokenInput = {
  name: "ref_logprobs",
  column: null,
  doc: "reference log-probs (adapter off), computed by the trainer",
};

/** Per-token inputs of a chunk, each `[C]`, and the run's scalars. */
export interface TokenInputs {
  logprobs: Value; // current policy log-probs (differentiable)
  /** The declared inputs by name, each `[C]`. */
  inputs: Readonly<Record<string, Value>>;
  epsLow: Value; // []
  epsHigh: Value; // []
  beta: Value; // []
}

/** Per-token results, each `[C]`: the loss `l` and its parts for metrics. */
export interface TokenLoss {
  loss: Value;
  pg: Value;
  kl: Value;
  /** 1 where the ratio was clipped (the clipped branch is active and holds the gradient at zero). */
  clipped: Value;
}

/** Builds one objective's per-token loss. */
export type Objective = (g: GraphBuilder, x: TokenInputs) => TokenLoss;

/** GRPO's (and PPO's) clipped surrogate, plus `beta · k3` when a reference is given. */
export const clippedSurrogate: Objective = (g, x) => {
  const ratio = Exp.emit(g, Sub.emit(g, x.logprobs, x.inputs[OLD_LOGPROBS.name])); // [C]
  return withKl(g, x, pessimisticClip(g, ratio, x));
};

/** PPO's `-min(r·A, clip(r)·A)` for a given ratio `r` `[C]`, and where the clipped branch holds it. */
export function pessimisticClip(
  g: GraphBuilder,
  ratio: Value,
  x: TokenInputs,
): { pg: Value; clipped: Value } {
  const advantages = x.inputs[ADVANTAGES.name];
  const low = Sub.emit(g, 1, x.epsLow); // []
  const high = Add.emit(g, 1, x.epsHigh); // []
  const unclipped = Mul.emit(g, ratio, advantages); // [C]
  const clippedTerm = Mul.emit(g, clip(g, ratio, low, high), advantages); // [C]
  const pg = Neg.emit(g, Min.emit(g, unclipped, clippedTerm)); // [C]
  const below = And.emit(g, Less.emit(g, ratio, low), Less.emit(g, advantages, 0)); // [C]
  const above = And.emit(g, Greater.emit(g, ratio, high), Greater.emit(g, advantages, 0)); // [C]
  // Max of the two indicators rather than Or: the same 0/1 values, and WebGPU has no Or kernel.
  const clipped = Max.emit(g, Cast.emit(g, below, "float32"), Cast.emit(g, above, "float32")); // [C]
  return { pg, clipped };
}

/** `pg + beta · k3(lp, ref)` when the reference input is there (beta > 0), else `pg` with kl 0. */
export function withKl(g: GraphBuilder, x: TokenInputs, p: { pg: Value; clipped: Value }): TokenLoss {
  const ref: Value | undefined = x.inputs[REF_LOGPROBS.name];
  if (!ref) return { loss: p.pg, pg: p.pg, kl: Mul.emit(g, p.pg, 0), clipped: p.clipped };
  const kl = k3(g, x.logprobs, ref); // [C]
  return { loss: Add.emit(g, p.pg, Mul.emit(g, kl, x.beta)), pg: p.pg, kl, clipped: p.clipped };
}

/**
 * Clip(x, low, high) written with Where: the same values, and the same gradient (dy where x is within the
 * bounds, a bound itself included). WebGPU's Clip reads its bounds on the host, which would copy the two
 * scalars back from the device inside every train step (lib/model/graph/forms.ts).
 */
export function clip(g: GraphBuilder, x: Value, low: Value, high: Value): Value {
  return Where.emit(g, Less.emit(g, x, low), low, Where.emit(g, Greater.emit(g, x, high), high, x));
}

/** Supervised warm start: negative log-likelihood of the masked tokens. */
export const negativeLogLikelihood: Objective = (g, x) => {
  const nll = Neg.emit(g, x.logprobs); // [C]
  const zero = Mul.emit(g, x.logprobs, 0); // [C]
  return { loss: nll, pg: nll, kl: zero, clipped: zero };
};

/** k3 estimator of KL(policy ‖ reference): `exp(ref - lp) - (ref - lp) - 1`, ≥ 0. */
export function k3(g: GraphBuilder, lp: Value, ref: Value): Value {
  const d = Sub.emit(g, ref, lp); // [C]
  return Sub.emit(g, Sub.emit(g, Exp.emit(g, d), d), 1); // [C]
}
