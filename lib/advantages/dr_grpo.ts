/**
 * `dr_grpo` (Dr. GRPO, Liu et al. 2025, "Understanding R1-Zero-Like Training"): A_i = r_i − mean_g,
 * never divided by a std, whatever `mask.scale_rewards` says: the paper drops the std because it
 * up-weights questions that are too easy or too hard. (Its other half, the length-unbiased loss, is
 * train.loss_aggregation `seq_mean_token_sum_norm`.) A group of one or with equal rewards gets 0.
 *
 * @module
 */

import { broadcast, fracZero, normalize } from "./groups.ts";
import type { Estimator } from "./types.ts";

export const drGrpo: Estimator = {
  name: "dr_grpo",
  doc: "outcome reward minus the group mean, no std division",
  needs: { columns: ["reward", "group_id"], groups: true },
  advantages(batch, o) {
    const { adv, zeroStdGroups } = normalize(batch.reward, batch.groups, "none", o.std_eps);
    return {
      advantages: broadcast(adv, batch.offsets, batch.lossMask),
      metrics: { frac_zero_std_groups: fracZero(zeroStdGroups, batch.groups) },
    };
  },
};
