/**
 * `mt_grpo_turns` against verl issue #7244 ("a turn-level baseline that stays unbiased under variable turn
 * counts"): there, per-turn advantages normalised per turn index are *summed over the turns that follow*
 * (a reward-to-go), so the baseline of an early turn has as many terms as the episode has turns: the
 * policy's decision to take another turn changes the baseline of the turns before it, a bias equal to the
 * group mean of the intermediate rewards that follow. Ours gives each token its turn's own normalised
 * reward (plus the outcome advantage), no sum over later turns, so that bias cannot arise: an episode's
 * later turns, their existence and their rewards, never change an earlier turn's advantage. This test
 * holds that property; the summed construction fails it (planted once: turn advantages summed from each
 * turn on).
 */

import assert from "node:assert/strict";
import { groupsOf } from "../../lib/advantages/groups.ts";
import { mtGrpoTurns } from "../../lib/advantages/mt_grpo_turns.ts";
import type { AdvantageOptions, EpisodeBatch } from "../../lib/advantages/types.ts";

const OPTIONS: AdvantageOptions = {
  scale_rewards: "group",
  std_eps: 1e-6,
  turn_coef: 1,
  gamma: 1,
  lam: 1,
  gae_unit: "turn",
};

/** One group; episode i has `turnRewards[i].length` turns of two trained tokens each. */
function batchOf(turnRewards: number[][], reward: number[]): EpisodeBatch {
  const turnIdx: number[] = [], offsets = [0], trOffsets = [0];
  for (const turns of turnRewards) {
    turns.forEach((_, j) => turnIdx.push(j + 1, j + 1));
    offsets.push(turnIdx.length);
    trOffsets.push(trOffsets.at(-1)! + turns.length);
  }
  return {
    rows: turnRewards.length,
    groups: groupsOf(turnRewards.map(() => 0)),
    reward: Float32Array.from(reward),
    offsets: Int32Array.from(offsets),
    lossMask: new Uint8Array(turnIdx.length).fill(1),
    turnIdx: Int16Array.from(turnIdx),
    firstResultTurn: new Int16Array(turnRewards.length),
    turnRewards: { values: Float32Array.from(turnRewards.flat()), offsets: Int32Array.from(trOffsets) },
  };
}

/** The advantage of each turn of episode `i` (its first token's). */
function turnAdvantages(batch: EpisodeBatch, advantages: Float32Array, i: number): number[] {
  const out: number[] = [];
  for (let t = batch.offsets[i]; t < batch.offsets[i + 1]; t += 2) out.push(advantages[t]);
  return out;
}

Deno.test("mt_grpo_turns: an episode's later turns never change its earlier turns' advantages (verl #7244)", () => {
  const rewards = [1, 0, 1, 0];
  // Episode 3 stops after two turns, or takes a third turn with an intermediate reward.
  const stops = [[0.2, 0.5], [0.1, 0.3, 0.4], [0.3, 0.2, 0.6], [0.4, 0.1]];
  const continues = [[0.2, 0.5], [0.1, 0.3, 0.4], [0.3, 0.2, 0.6], [0.4, 0.1, 0.9]];
  const [a, b] = [batchOf(stops, rewards), batchOf(continues, rewards)];
  const [outA, outB] = [mtGrpoTurns.advantages(a, OPTIONS), mtGrpoTurns.advantages(b, OPTIONS)];
  const [turnsA, turnsB] = [turnAdvantages(a, outA.advantages, 3), turnAdvantages(b, outB.advantages, 3)];
  assert.deepEqual(turnsB.slice(0, 2), turnsA, "turns 1 and 2 keep their advantages");
  for (const i of [0, 1, 2]) {
    assert.deepEqual(
      turnAdvantages(b, outB.advantages, i).slice(0, 2),
      turnAdvantages(a, outA.advantages, i).slice(0, 2),
    );
  }
});
