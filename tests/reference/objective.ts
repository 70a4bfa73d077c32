/**
 * The training objective of docs/DESIGN.md in plain float64 TypeScript, written from the formula alone (no
 * project code): the yardstick for the train graph's loss and, through finite differences over the
 * float64 reference model, its gradients.
 *
 *   r  = exp(lp - old);  pg = -min(r·A, clip(r, 1-eps_low, 1+eps_high)·A)
 *   kl = exp(ref - lp) - (ref - lp) - 1;  l = pg + beta·kl   (sft: l = -lp)
 *   gspo:  s = exp(mean_t∈m (lp0 - old)); r = s·exp(lp - lp0); pg as above with r   (GSPO-token)
 *   cispo: w = clip(exp(lp0 - old), 1-eps_low, 1+eps_high); pg = -w·A·lp
 *   where lp0 are the log-probs where the gradient is taken (`frozen`): the stop-gradients as constants,
 *   so central differences around lp0 give the rule's gradient
 *   token_mean: Σ m·l / Σ m · seq_mean_token_mean: mean_i(Σ_t m·l / Σ_t m) over episodes with masked
 *   tokens · seq_mean_token_sum_norm: Σ m·l / (N_episodes · max_response_tokens)
 *
 * @module
 */

/** One episode: per-token arrays aligned with its tokens (entry 0 is never in the loss). */
export interface ObjectiveEpisode {
  logprobs: ArrayLike<number>; // current policy
  old: ArrayLike<number>;
  advantages: ArrayLike<number>;
  mask: ArrayLike<number>;
  ref?: ArrayLike<number>;
  /** gspo, cispo: the log-probs at the point the gradient is taken (the stop-gradients' values). */
  frozen?: ArrayLike<number>;
}

export interface ObjectiveSettings {
  aggregation: "token_mean" | "seq_mean_token_mean" | "seq_mean_token_sum_norm" | "sft";
  epsLow: number;
  epsHigh: number;
  beta: number;
  maxResponseTokens: number;
  /** The policy loss (default clipped; sft by its aggregation name). */
  loss?: "clipped" | "gspo" | "cispo";
}

/** GSPO's log s of an episode: the mean over its masked tokens of frozen - old. */
function seqLogRatio(e: ObjectiveEpisode): number {
  let sum = 0, count = 0;
  for (let t = 1; t < e.mask.length; t++) {
    if (e.mask[t]) (sum += e.frozen![t] - e.old[t]), (count += 1);
  }
  return count > 0 ? sum / count : 0;
}

/** Per-token loss l of token t. */
function tokenLoss(e: ObjectiveEpisode, t: number, s: ObjectiveSettings): number {
  const lp = e.logprobs[t];
  if (s.aggregation === "sft") return -lp;
  const a = e.advantages[t];
  const clamp = (r: number) => Math.min(Math.max(r, 1 - s.epsLow), 1 + s.epsHigh);
  let l: number;
  if (s.loss === "cispo") {
    l = -clamp(Math.exp(e.frozen![t] - e.old[t])) * a * lp;
  } else {
    const r = s.loss === "gspo" ? Math.exp(seqLogRatio(e) + lp - e.frozen![t]) : Math.exp(lp - e.old[t]);
    l = -Math.min(r * a, clamp(r) * a);
  }
  if (s.beta > 0) {
    const d = e.ref![t] - lp;
    l += s.beta * (Math.exp(d) - d - 1);
  }
  return l;
}

/** The batch loss. */
export function objective(episodes: readonly ObjectiveEpisode[], s: ObjectiveSettings): number {
  const per = episodes.map((e) => {
    let sum = 0, count = 0;
    for (let t = 1; t < e.mask.length; t++) {
      if (!e.mask[t]) continue;
      sum += tokenLoss(e, t, s);
      count += 1;
    }
    return { sum, count };
  });
  const total = per.reduce((a, p) => a + p.sum, 0);
  const count = per.reduce((a, p) => a + p.count, 0);
  switch (s.aggregation) {
    case "seq_mean_token_mean": {
      const used = per.filter((p) => p.count > 0);
      return used.length ? used.reduce((a, p) => a + p.sum / p.count, 0) / used.length : 0;
    }
    case "seq_mean_token_sum_norm":
      return total / (episodes.length * s.maxResponseTokens);
    default:
      return count > 0 ? total / count : 0;
  }
}
