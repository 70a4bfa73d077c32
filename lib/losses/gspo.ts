/**
 * GSPO (Group Sequence Policy Optimization, arXiv 2507.18071), its GSPO-token form, as
 * `train.loss.objective: gspo`. Per episode i, over its trained tokens (loss mask, token 0 excluded):
 *
 *   s_i   = exp( mean_t (lp_t − old_t) )                the length-normalised sequence ratio
 *   r_t   = sg(s_i) · exp(lp_t − sg(lp_t))              value s_i, gradient s_i · ∇lp_t
 *   pg_t  = max(−A_t · r_t, −A_t · clip(r_t, 1 − eps_low, 1 + eps_high))
 *   l_t   = pg_t + beta · k3_t                          (k3 only when beta > 0, as `clipped`)
 *
 * aggregated by `train.loss.aggregation` like every loss (batch.ts). `sg` is `detach` (lib/onnx/detach.ts):
 * the gradient stops at the sequence ratio, so each token's gradient is s_i·∇lp_t, the paper's GSPO-token
 * rule (equation 13); with one advantage per episode it is the gradient of the sequence-level objective.
 *
 * The trainer computes log s_i (`seq_log_ratio`, one value repeated over the episode's tokens) before
 * each optimizer step from the current policy's log-probs (one extra pass of the train graph), because a
 * chunk of the head sees only some of an episode's tokens (lib/train/passes.ts `withComputedInputs`).
 *
 * Names: TRL's `importance_sampling_level="sequence"`, verl's `policy_loss.loss_mode: gspo`.
 * Deviations: none in the formula. The paper's clip range is far narrower than PPO's (eps_low 3e-4,
 * eps_high 4e-4); `train.loss.eps_low` / `eps_high` keep their defaults (0.2), so set them for GSPO
 * (docs/algorithms.md).
 *
 * @module
 */

import { detach } from "../onnx/detach.ts";
import { OPS } from "../onnx/ops.ts";
import {
  ADVANTAGES,
  BETA,
  EPS_HIGH,
  EPS_LOW,
  type Objective,
  OLD_LOGPROBS,
  pessimisticClip,
  REF_LOGPROBS,
  withKl,
} from "./objective.ts";
import type { PolicyLoss, TokenInput } from "./types.ts";

const { Add, Exp, Sub } = OPS;

/** log s_i of the token's episode, computed by the trainer from the current log-probs. */
export const SEQ_LOG_RATIO: TokenInput = {
  name: "seq_log_ratio",
  column: null,
  doc: "mean over the episode's trained tokens of (log-prob − old log-prob), computed by the trainer",
  computed: {
    each: "optimizer step",
    fromLogprobs: (logprobs, episode, trained) => {
      const old = episode.inputs[OLD_LOGPROBS.name];
      let sum = 0, count = 0;
      for (let t = 0; t < trained.length; t++) {
        if (trained[t] === 0) continue;
        sum += logprobs[t] - old[t];
        count += 1;
      }
      return new Float32Array(trained.length).fill(count > 0 ? sum / count : 0);
    },
  },
};

/** GSPO-token: PPO's clip on the sequence ratio, which every token of the episode shares. */
export const gspoToken: Objective = (g, x) => {
  const tied = Sub.emit(g, x.logprobs, detach(g, x.logprobs)); // [C] value 0, gradient 1
  const ratio = Exp.emit(g, Add.emit(g, x.inputs[SEQ_LOG_RATIO.name], tied)); // [C] value s_i
  return withKl(g, x, pessimisticClip(g, ratio, x));
};

/** `train.loss.objective: gspo`. */
export const GSPO: PolicyLoss = {
  name: "gspo",
  doc: "GSPO-token: PPO's clip on the episode's length-normalised sequence ratio, shared by its tokens",
  inputs: [OLD_LOGPROBS, ADVANTAGES, SEQ_LOG_RATIO],
  reference: REF_LOGPROBS,
  scalars: [EPS_LOW, EPS_HIGH, BETA],
  readsOldLogprobs: true,
  // Its sequence ratio is computed before each optimizer step, which PPO's minibatch epochs do not run.
  takesHeads: false,
  gradientStops: "at the sequence ratio: each token's gradient is s x grad log-prob",
  tokenLoss: gspoToken,
};
