/**
 * `mt_grpo`: MT-GRPO's turn-level credit assignment (Zeng et al. 2025, arXiv:2505.11821), as
 * verl-tool's recipe computes it (`compute_mt_grpo_advantage_return`):
 *
 *   outcome_adv_i  = norm(reward)_i            (group-normalized outcome reward)
 *   turn_adv_i     = norm(turn_reward)_i       (group-normalized episode turn reward, lib/score/turns.ts)
 *   combined_adv_i = norm(reward + turn_reward)_i
 *   episode with a tool result (first result after assistant turn j*):
 *     token t of turn ≤ j*  →  outcome_adv_i + turn_coef · turn_adv_i
 *     later tokens          →  outcome_adv_i
 *   episode without a tool result: every token → combined_adv_i
 *   then, with `mask.whiten`, whitening over all masked tokens of the batch (the recipe always does).
 *
 * "Before the first tool result" = the policy's tokens up to the first result: tokens with
 * turn_idx ≤ j*, where j* is the first assistant turn with a tool call that ran (status ok,
 * tool_error, timeout, oom, output_truncated: verl-tool's valid actions, whose observation carries a
 * `<result>`). Only masked tokens get a value.
 *
 * Deviations from the recipe, named:
 * - eps = `mask.std_eps` (recipe: 1e-4); the divisor follows `mask.scale_rewards` (recipe: group);
 * - zero-variance groups get exactly 0 (groups.ts); the recipe returns r − mean when std < 1e-4, which
 *   is 0 for equal rewards but not for rewards closer than 1e-4;
 * - whitening is optional (`mask.whiten`, default false; set it true to match the recipe);
 * - a file without `turn_reward` is refused (the recipe silently falls back to plain GRPO).
 *
 * @module
 */

import { fracZero, normalize } from "./groups.ts";
import type { Estimator } from "./types.ts";

export const mtGrpo: Estimator = {
  name: "mt_grpo",
  doc: "outcome advantage plus turn_coef x turn advantage on tokens before the first tool result",
  needs: {
    columns: ["reward", "turn_reward", "group_id", "tool_calls"],
    perToken: ["turn_idx"],
    groups: true,
  },
  advantages(batch, o) {
    const turnReward = batch.turnReward!;
    const norm = (v: ArrayLike<number>) => normalize(v, batch.groups, o.scale_rewards, o.std_eps);
    const outcome = norm(batch.reward);
    const turn = norm(turnReward);
    const combined = norm(Float64Array.from(batch.reward, (r, i) => r + turnReward[i]));
    const out = new Float32Array(batch.lossMask.length);
    const { offsets, lossMask, turnIdx } = batch;
    for (let i = 0; i < batch.rows; i++) {
      const jStar = batch.firstResultTurn[i];
      const before = outcome.adv[i] + o.turn_coef * turn.adv[i];
      for (let t = offsets[i]; t < offsets[i + 1]; t++) {
        if (!lossMask[t]) continue;
        out[t] = jStar === 0 ? combined.adv[i] : turnIdx[t] <= jStar ? before : outcome.adv[i];
      }
    }
    return {
      advantages: out,
      metrics: {
        frac_zero_std_groups: fracZero(outcome.zeroStdGroups, batch.groups),
        frac_zero_std_turn_groups: fracZero(turn.zeroStdGroups, batch.groups),
        frac_with_tool_result: batch.rows
          ? batch.firstResultTurn.filter((j) => j > 0).length / batch.rows
          : NaN,
      },
    };
  },
};
