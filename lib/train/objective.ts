/**
 * The per-token training objectives of docs/DESIGN.md ("The objective"), as graph compositions. Each is a
 * separate function picked once from config (`train.loss.aggregation`), never an `if` inside a loss.
 *
 *   r   = exp(lp - old)
 *   pg  = -min(r · A, clip(r, 1 - eps_low, 1 + eps_high) · A)
 *   kl  = exp(ref - lp) - (ref - lp) - 1          (k3; only when beta > 0)
 *   l   = pg + beta · kl
 *   sft: l = -lp
 *
 * The aggregation (token_mean, seq_mean_token_mean, seq_mean_token_sum_norm) is a per-token weight
 * computed over the whole optimizer batch before the micro-batches run (batch.ts), so the loss of a
 * micro-batch is `Σ weight · l` and micro-batch gradients add up to the whole batch's.
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
import { OPS } from "../onnx/ops.ts";

const { Add, And, Cast, Clip, Exp, Greater, Less, Min, Mul, Neg, Or, Sub } = OPS;

/** Per-token inputs of a chunk, each `[C]`, and the run's scalars. */
export interface TokenInputs {
  logprobs: Value; // current policy log-probs (differentiable)
  old: Value; // rollout log-probs
  advantages: Value;
  ref?: Value; // reference log-probs (adapter off), when beta > 0
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

/** GRPO's clipped surrogate, plus `beta · k3` when a reference is given. */
export const clippedSurrogate: Objective = (g, x) => {
  const ratio = Exp.emit(g, Sub.emit(g, x.logprobs, x.old)); // [C]
  const low = Sub.emit(g, 1, x.epsLow); // []
  const high = Add.emit(g, 1, x.epsHigh); // []
  const unclipped = Mul.emit(g, ratio, x.advantages); // [C]
  const clippedTerm = Mul.emit(g, Clip.emit(g, ratio, low, high), x.advantages); // [C]
  const pg = Neg.emit(g, Min.emit(g, unclipped, clippedTerm)); // [C]
  const below = And.emit(g, Less.emit(g, ratio, low), Less.emit(g, x.advantages, 0)); // [C]
  const above = And.emit(g, Greater.emit(g, ratio, high), Greater.emit(g, x.advantages, 0)); // [C]
  const clipped = Cast.emit(g, Or.emit(g, below, above), "float32"); // [C]
  if (!x.ref) return { loss: pg, pg, kl: Mul.emit(g, pg, 0), clipped };
  const kl = k3(g, x.logprobs, x.ref); // [C]
  return { loss: Add.emit(g, pg, Mul.emit(g, kl, x.beta)), pg, kl, clipped };
};

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
