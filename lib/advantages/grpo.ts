/**
 * `grpo`: every masked token of episode i gets A_i = (r_i − mean_g) / (std_g + eps), r = `reward`,
 * over the episode's group g (DeepSeekMath's outcome supervision; TRL's and verl's GRPO).
 *
 * Choices: std is Bessel-corrected (torch `std()`, as TRL and verl); `mask.scale_rewards` picks the
 * divisor (group std, batch std, or none); eps = `mask.std_eps` (TRL 1e-4, verl 1e-6); a group of one
 * or with equal rewards gets exactly 0 (groups.ts; verl gives a lone episode its raw reward).
 *
 * @module
 */

import { broadcast, fracZero, normalize } from "./groups.ts";
import type { Estimator } from "./types.ts";

export const grpo: Estimator = {
  name: "grpo",
  doc: "group-normalized outcome reward on every trained token",
  needs: { columns: ["reward", "group_id"], groups: true },
  advantages(batch, o) {
    const { adv, zeroStdGroups } = normalize(batch.reward, batch.groups, o.scale_rewards, o.std_eps);
    return {
      advantages: broadcast(adv, batch.offsets, batch.lossMask),
      metrics: { frac_zero_std_groups: fracZero(zeroStdGroups, batch.groups) },
    };
  },
};
