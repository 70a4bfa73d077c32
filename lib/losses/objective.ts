/**
 * The policy losses' shared parts (the declared inputs, PPO's clip, the k3 KL term) and the two first
 * losses of docs/DESIGN.md ("The objective"), each a record (types.ts) registered by name
 * (`train.loss.objective`) in registry.ts, never an `if` inside a loss. Each record declares the
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
import { OPS } from "../onnx/ops.ts";
import type { LossScalar, Objective, PolicyLoss, TokenInput, TokenInputs, TokenLoss } from "./types.ts";

export type { LossScalar, Objective, PolicyLoss, TokenInput, TokenInputs, TokenLoss } from "./types.ts";

const { Add, And, Cast, Exp, Greater, Less, Max, Min, Mul, Neg, Sub, Where } = OPS;

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

/** PPO's clip range below, 1 - eps_low (clipped, gspo, cispo). */
export const EPS_LOW: LossScalar = {
  key: "eps_low",
  default: 0.2,
  min: 0,
  max: 1,
  maxOpen: true,
  doc: "ratio clip below: 1 - eps_low (gspo: the paper uses 3e-4)",
};
/** PPO's clip range above, 1 + eps_high. */
export const EPS_HIGH: LossScalar = {
  key: "eps_high",
  default: 0.2,
  min: 0,
  max: 10,
  doc: "ratio clip above: 1 + eps_high (DAPO's clip-higher uses 0.28; gspo: the paper uses 4e-4)",
};
/** The k3 KL term's weight; its reference input and pass exist only when it is above 0. */
export const BETA: LossScalar = {
  key: "beta",
  default: 0.0,
  min: 0,
  doc: "k3 KL weight against the reference policy (train.loss.reference); 0 = no reference pass",
};

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
  const low = Sub.emit(g, 1, x.scalars[EPS_LOW.key]); // []
  const high = Add.emit(g, 1, x.scalars[EPS_HIGH.key]); // []
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
  return { loss: Add.emit(g, p.pg, Mul.emit(g, kl, x.scalars[BETA.key])), pg: p.pg, kl, clipped: p.clipped };
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

/** PPO's clipped surrogate: GRPO, Dr. GRPO, RLOO, MT-GRPO and PPO itself. */
export const CLIPPED: PolicyLoss = {
  name: "clipped",
  doc: "PPO's clipped surrogate on the advantages, plus beta x k3 KL to the base model",
  inputs: [OLD_LOGPROBS, ADVANTAGES],
  reference: REF_LOGPROBS,
  scalars: [EPS_LOW, EPS_HIGH, BETA],
  readsOldLogprobs: true,
  takesHeads: true,
  gradientStops: "nowhere (the clip's subgradient is zero where the clipped branch holds)",
  tokenLoss: clippedSurrogate,
};

/** Supervised warm start. */
export const SFT: PolicyLoss = {
  name: "sft",
  doc: "negative log-likelihood of the masked tokens (supervised warm start)",
  inputs: [],
  scalars: [],
  readsOldLogprobs: false,
  takesHeads: false,
  gradientStops: "nowhere",
  tokenLoss: negativeLogLikelihood,
};
