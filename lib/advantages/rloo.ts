/**
 * `rloo` (REINFORCE leave-one-out, Kool et al. 2019; Ahmadian et al. 2024): the baseline of episode i
 * is the mean reward of the other n − 1 episodes of its group:
 *   A_i = r_i − (Σ_{j≠i} r_j) / (n − 1) = n / (n − 1) · (r_i − mean_g).
 *
 * Choices: `mask.scale_rewards` `group` or `batch` then divides by that std + eps as for grpo (set
 * `none` for the paper's plain RLOO); a group of one or with equal rewards gets 0.
 *
 * @module
 */

import { broadcast, fracZero, normalize } from "./groups.ts";
import type { Estimator } from "./types.ts";

export const rloo: Estimator = {
  name: "rloo",
  doc: "outcome reward minus the mean of the group's other episodes",
  needs: { columns: ["reward", "group_id"], groups: true },
  advantages(batch, o) {
    const { adv, zeroStdGroups } = normalize(
      batch.reward,
      batch.groups,
      o.scale_rewards,
      o.std_eps,
      "leave_one_out",
    );
    return {
      advantages: broadcast(adv, batch.offsets, batch.lossMask),
      metrics: { frac_zero_std_groups: fracZero(zeroStdGroups, batch.groups) },
    };
  },
};
