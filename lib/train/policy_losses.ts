/**
 * Every policy loss by its `train.loss.objective` name: one record each, picked once from config
 * (algorithm.ts). A record declares the per-token inputs the loss reads (columns of the batch, or ones the
 * trainer computes), its KL term's reference, whether the estimator's heads train beside it, and where
 * its gradient stops; its per-token loss is a graph composition in its own file (objective.ts: clipped and
 * sft; gspo.ts; cispo.ts).
 *
 * @module
 */

import type { OBJECTIVES } from "../config/schema.ts";
import {
  ADVANTAGES,
  clippedSurrogate,
  negativeLogLikelihood,
  type Objective,
  OLD_LOGPROBS,
  REF_LOGPROBS,
  type TokenInput,
} from "./objective.ts";
import { gspoToken, SEQ_LOG_RATIO } from "./gspo.ts";
import { cispo } from "./cispo.ts";

/** A policy loss: its per-token loss and the per-token inputs it reads. */
export interface PolicyLoss {
  name: PolicyLossName;
  /** One line: what it computes. */
  doc: string;
  /** The per-token inputs it always reads, in graph-input order. */
  inputs: readonly TokenInput[];
  /** Its KL term's reference input, read when `train.loss.beta` > 0 (absent: no KL term). */
  reference?: TokenInput;
  /** Whether it reads the rollout's log-probs, so `train.loss.rollout_is` can recompute them. */
  readsOldLogprobs: boolean;
  /** Whether the heads an estimator declares (the value head) train beside it. */
  takesHeads: boolean;
  /** Where its gradient stops (`detach`), in words, or "nowhere". */
  gradientStops: string;
  tokenLoss: Objective;
}

/** `train.loss.objective`'s names. */
export type PolicyLossName = (typeof OBJECTIVES)[number];

/** Every policy loss by its `train.loss.objective` name. */
export const POLICY_LOSSES: Readonly<Record<PolicyLossName, PolicyLoss>> = {
  clipped: {
    name: "clipped",
    doc: "PPO's clipped surrogate on the advantages, plus beta x k3 KL to the base model",
    inputs: [OLD_LOGPROBS, ADVANTAGES],
    reference: REF_LOGPROBS,
    readsOldLogprobs: true,
    takesHeads: true,
    gradientStops: "nowhere (the clip's subgradient is zero where the clipped branch holds)",
    tokenLoss: clippedSurrogate,
  },
  gspo: {
    name: "gspo",
    doc: "GSPO-token: PPO's clip on the episode's length-normalised sequence ratio, shared by its tokens",
    inputs: [OLD_LOGPROBS, ADVANTAGES, SEQ_LOG_RATIO],
    reference: REF_LOGPROBS,
    readsOldLogprobs: true,
    // Its sequence ratio is computed per optimizer step, which PPO's minibatch epochs do not run.
    takesHeads: false,
    gradientStops: "at the sequence ratio: each token's gradient is s · grad log-prob",
    tokenLoss: gspoToken,
  },
  cispo: {
    name: "cispo",
    doc: "CISPO: REINFORCE on the log-probs weighted by the clipped, detached importance ratio",
    inputs: [OLD_LOGPROBS, ADVANTAGES],
    reference: REF_LOGPROBS,
    readsOldLogprobs: true,
    takesHeads: true,
    gradientStops: "at the clipped importance weight",
    tokenLoss: cispo,
  },
  sft: {
    name: "sft",
    doc: "negative log-likelihood of the masked tokens (supervised warm start)",
    inputs: [],
    readsOldLogprobs: false,
    takesHeads: false,
    gradientStops: "nowhere",
    tokenLoss: negativeLogLikelihood,
  },
};
