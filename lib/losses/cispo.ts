/**
 * CISPO (Clipped IS-weight Policy Optimization, MiniMax-M1, arXiv 2506.13585) as
 * `train.loss.objective: cispo`. Per trained token:
 *
 *   r_t   = exp(lp_t − old_t)
 *   pg_t  = −sg(clip(r_t, 1 − eps_low, 1 + eps_high)) · A_t · lp_t
 *   l_t   = pg_t + beta · k3_t                          (k3 only when beta > 0, as `clipped`)
 *
 * aggregated by `train.loss.aggregation`. `sg` is `detach` (lib/onnx/detach.ts): the gradient stops at
 * the clipped importance weight, so every token keeps a gradient (REINFORCE weighted by the clipped
 * ratio), where PPO's clip zeroes the gradient of tokens outside the range. `clipped` (clip_frac) counts
 * the tokens whose weight was clipped, on either side, whatever the advantage's sign.
 *
 * Names: TRL's `loss_type="cispo"`, verl's `policy_loss.loss_mode: cispo`. Deviations: the paper (and
 * TRL) bound the weight above only; we clip on both sides with `train.loss.eps_low` / `eps_high`, as
 * issue 30 defines it; eps_low close to 1 (0.99) gives the paper's one-sided form. TRL's cap is the
 * weight itself (`epsilon_high` 5.0 means r ≤ 5); ours is 1 + eps_high (eps_high 4.0 for the same cap).
 *
 * @module
 */

import { detach } from "../onnx/detach.ts";
import { OPS } from "../onnx/ops.ts";
import {
  ADVANTAGES,
  BETA,
  clip,
  EPS_HIGH,
  EPS_LOW,
  type Objective,
  OLD_LOGPROBS,
  REF_LOGPROBS,
  withKl,
} from "./objective.ts";
import type { PolicyLoss } from "./types.ts";

const { Add, Cast, Exp, Greater, Less, Max, Mul, Neg, Sub } = OPS;

/** CISPO: REINFORCE on lp with the clipped, detached importance weight. */
export const cispo: Objective = (g, x) => {
  const ratio = Exp.emit(g, Sub.emit(g, x.logprobs, x.inputs[OLD_LOGPROBS.name])); // [C]
  const low = Sub.emit(g, 1, x.scalars[EPS_LOW.key]); // []
  const high = Add.emit(g, 1, x.scalars[EPS_HIGH.key]); // []
  const weight = detach(g, clip(g, ratio, low, high)); // [C]
  const pg = Neg.emit(g, Mul.emit(g, Mul.emit(g, weight, x.inputs[ADVANTAGES.name]), x.logprobs)); // [C]
  const outside = Max.emit(
    g,
    Cast.emit(g, Less.emit(g, ratio, low), "float32"),
    Cast.emit(g, Greater.emit(g, ratio, high), "float32"),
  ); // [C]
  return withKl(g, x, { pg, clipped: outside });
};

/** `train.loss.objective: cispo`. */
export const CISPO: PolicyLoss = {
  name: "cispo",
  doc: "CISPO: REINFORCE on the log-probs weighted by the clipped, detached importance ratio",
  inputs: [OLD_LOGPROBS, ADVANTAGES],
  reference: REF_LOGPROBS,
  scalars: [EPS_LOW, EPS_HIGH, BETA],
  readsOldLogprobs: true,
  takesHeads: true,
  gradientStops: "at the clipped importance weight",
  tokenLoss: cispo,
};
