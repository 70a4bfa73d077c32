/**
 * `mt_grpo_turns`: our per-turn extension of MT-GRPO (not in the paper or verl-tool). Each assistant
 * turn gets its own turn advantage:
 *
 *   outcome_adv_i    = norm(reward)_i                              (over the group)
 *   turn_adv_{i,j}   = norm over the group's episodes that have a turn j of turn_rewards[j]
 *   token t sampled in turn j = turn_idx[t]  →  outcome_adv_i + turn_coef · turn_adv_{i,j}
 *
 * norm is groups.ts's rule (so a turn j reached by one episode of the group, or with equal turn
 * rewards, contributes 0); `mask.whiten` applies afterwards as for every estimator. Unlike mt_grpo
 * there is no "no tool result" branch: a turn without tool calls has its own turn reward (`no_tool`).
 *
 * @module
 */

import { fracZero, type Groups, normalize } from "./groups.ts";
import type { EpisodeBatch, Estimator } from "./types.ts";

const ONE_GROUP = (n: number): Groups => ({
  count: 1,
  start: Int32Array.of(0, n),
  members: Int32Array.from({ length: n }, (_, k) => k),
});

/** Turn advantages aligned with `turn_rewards`; counts (group, turn) pairs and the zero-variance ones. */
function turnAdvantages(batch: EpisodeBatch, scale: "group" | "batch" | "none", eps: number) {
  const tr = batch.turnRewards!;
  const adv = new Float64Array(tr.values.length);
  let pairs = 0;
  let zero = 0;
  for (let g = 0; g < batch.groups.count; g++) {
    const idx = batch.groups.members.subarray(batch.groups.start[g], batch.groups.start[g + 1]);
    let maxTurns = 0;
    for (const i of idx) maxTurns = Math.max(maxTurns, tr.offsets[i + 1] - tr.offsets[i]);
    for (let j = 1; j <= maxTurns; j++) {
      const have = Array.from(idx).filter((i) => tr.offsets[i + 1] - tr.offsets[i] >= j);
      const values = Float64Array.from(have, (i) => tr.values[tr.offsets[i] + j - 1]);
      // batch scale keeps the batch std of all turn rewards, as for the outcome.
      const normed = scale === "batch"
        ? normalizeWithBatchStd(values, tr.values, eps)
        : normalize(values, ONE_GROUP(values.length), scale, eps);
      have.forEach((i, k) => (adv[tr.offsets[i] + j - 1] = normed.adv[k]));
      pairs++;
      zero += normed.zeroStdGroups;
    }
  }
  return { adv, pairs, zero };
}

function normalizeWithBatchStd(values: Float64Array, all: Float32Array, eps: number) {
  const centred = normalize(values, ONE_GROUP(values.length), "none", eps);
  let sum = 0;
  for (const v of all) sum += v;
  const mean = sum / all.length;
  let ss = 0;
  for (const v of all) ss += (v - mean) ** 2;
  const std = all.length > 1 ? Math.sqrt(ss / (all.length - 1)) : 0;
  return { adv: centred.adv.map((v) => v / (std + eps)), zeroStdGroups: centred.zeroStdGroups };
}

export const mtGrpoTurns: Estimator = {
  name: "mt_grpo_turns",
  doc: "outcome advantage plus turn_coef x the advantage of each turn's own turn reward",
  needs: { columns: ["reward", "turn_rewards", "group_id"], perToken: ["turn_idx"], groups: true },
  advantages(batch, o) {
    const outcome = normalize(batch.reward, batch.groups, o.scale_rewards, o.std_eps);
    const turns = turnAdvantages(batch, o.scale_rewards, o.std_eps);
    const tr = batch.turnRewards!;
    const out = new Float32Array(batch.lossMask.length);
    const { offsets, lossMask, turnIdx } = batch;
    for (let i = 0; i < batch.rows; i++) {
      const n = tr.offsets[i + 1] - tr.offsets[i];
      for (let t = offsets[i]; t < offsets[i + 1]; t++) {
        if (!lossMask[t]) continue;
        const j = turnIdx[t];
        const turnAdv = j >= 1 && j <= n ? turns.adv[tr.offsets[i] + j - 1] : 0;
        out[t] = outcome.adv[i] + o.turn_coef * turnAdv;
      }
    }
    return {
      advantages: out,
      metrics: {
        frac_zero_std_groups: fracZero(outcome.zeroStdGroups, batch.groups),
        frac_zero_std_turn_groups: turns.pairs ? turns.zero / turns.pairs : NaN,
      },
    };
  },
};
