/**
 * Advantage estimators on hand-built scored tables, against values computed by hand here: grpo,
 * dr_grpo, rloo, mt_grpo (two-turn episodes with and without a tool result), mt_grpo_turns, batch
 * scaling, whitening, zero-variance groups and groups of one.
 */
import assert from "node:assert/strict";
import { mask } from "../../lib/pipeline/mod.ts";
import { testSession } from "../helpers/session.ts";
import { defaultConfig, type MaskConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { type EpisodeSpec, scoredTable } from "../fixtures/rollouts.ts";

const EPS = 1e-6;
const config = (o: Partial<MaskConfig>): MaskConfig => ({ ...defaultConfig().mask, ...o });

/** Per episode: the distinct advantages of its trained tokens, in token order, and untrained ones are 0. */
function perEpisode(table: ReturnType<typeof mask>["table"]): number[][] {
  const adv = table.getChild("advantages")!;
  const lm = table.getChild("loss_mask")!;
  return Array.from({ length: table.numRows }, (_, i) => {
    const a = adv.get(i)!.toArray() as Float32Array;
    const m = lm.get(i)!.toArray() as Uint8Array;
    a.forEach((v, t) => m[t] === 0 && assert.equal(v, 0, `untrained token ${t} of episode ${i} has 0`));
    const out: number[] = [];
    a.forEach((v, t) => m[t] === 1 && (out.length === 0 || out[out.length - 1] !== v) && out.push(v));
    return out;
  });
}

function close(actual: number[][], expected: number[][], tol = 1e-5) {
  assert.equal(actual.length, expected.length);
  actual.forEach((row, i) => {
    assert.equal(row.length, expected[i].length, `episode ${i}: ${row} vs ${expected[i]}`);
    row.forEach((v, k) =>
      assert.ok(Math.abs(v - expected[i][k]) <= tol, `episode ${i}[${k}]: ${v} vs ${expected[i][k]}`)
    );
  });
}

const answer = (group: number): EpisodeSpec => ({ group, turns: [{ text: "#### 4" }] });
// Group 0: rewards 1, 0, 0, 1; group 1: 1, 1 (zero variance); group 2: a group of one.
const SPECS = [0, 0, 0, 0, 1, 1, 2].map(answer);
const REWARDS = [1, 0, 0, 1, 1, 1, 0.7];
const STD0 = Math.sqrt((4 * 0.25) / 3); // Bessel: sum of squared deviations / (n - 1)

Deno.test("grpo divides by the Bessel-corrected group std; equal rewards and groups of one get 0", () => {
  const { table, summary } = mask(
    testSession({ mask: config({ estimator: "grpo" }) }),
    scoredTable(SPECS, REWARDS),
  );
  const a = 0.5 / (STD0 + EPS);
  close(perEpisode(table), [[a], [-a], [-a], [a], [0], [0], [0]]);
  assert.equal(summary.metrics.frac_zero_std_groups, 2 / 3);
});

Deno.test("dr_grpo subtracts the group mean only, whatever scale_rewards says", () => {
  const { table } = mask(
    testSession({ mask: config({ estimator: "dr_grpo", scale_rewards: "group" }) }),
    scoredTable(SPECS, REWARDS),
  );
  close(perEpisode(table), [[0.5], [-0.5], [-0.5], [0.5], [0], [0], [0]]);
});

Deno.test("rloo subtracts the mean of the other episodes of the group", () => {
  const plain = mask(
    testSession({ mask: config({ estimator: "rloo", scale_rewards: "none" }) }),
    scoredTable(SPECS, REWARDS),
  );
  // Episode 0: 1 - (0 + 0 + 1) / 3 = 2/3; episode 1: 0 - (1 + 0 + 1) / 3 = -2/3.
  close(perEpisode(plain.table), [[2 / 3], [-2 / 3], [-2 / 3], [2 / 3], [0], [0], [0]]);
  const scaled = mask(testSession({ mask: config({ estimator: "rloo" }) }), scoredTable(SPECS, REWARDS));
  const a = (2 / 3) / (STD0 + EPS);
  close(perEpisode(scaled.table), [[a], [-a], [-a], [a], [0], [0], [0]]);
});

Deno.test("scale_rewards batch divides by the std of every reward in the batch", () => {
  const { table } = mask(
    testSession({ mask: config({ scale_rewards: "batch" }) }),
    scoredTable(SPECS, REWARDS),
  );
  const mean = REWARDS.reduce((s, r) => s + r, 0) / REWARDS.length;
  const std = Math.sqrt(REWARDS.reduce((s, r) => s + (r - mean) ** 2, 0) / (REWARDS.length - 1));
  const a = 0.5 / (std + EPS);
  close(perEpisode(table), [[a], [-a], [-a], [a], [0], [0], [0]]);
});

// MT-GRPO: one group of four two-turn episodes.
// ep0: turn 1 calls a tool that succeeds (a tool result), turn 2 answers; reward 1, turn reward 0.35.
// ep1: turn 1's tool errors (it ran: a result), reward 0, turn reward 0.
// ep2: turn 1 calls no tool, a user turn follows (no tool result); reward 1, turn reward 0.
// ep3: turn 1 writes a malformed call (did not run: no result); reward 0, turn reward 0.
const MT: EpisodeSpec[] = [
  { group: 0, turns: [{ text: "call", calls: [{ status: "ok", output: "4" }] }, { text: "#### 4" }] },
  {
    group: 0,
    turns: [{ text: "call", calls: [{ status: "tool_error", output: "Error" }] }, { text: "#### 5" }],
  },
  { group: 0, turns: [{ text: "think", user: "Continue." }, { text: "#### 4" }] },
  {
    group: 0,
    turns: [{ text: "<tool_call>{", calls: [{ status: "invalid_tool_call" }] }, { text: "#### 6" }],
  },
  { group: 1, turns: [{ text: "alone", calls: [{ status: "ok", output: "1" }] }, { text: "#### 1" }] },
];
const MT_REWARD = [1, 0, 1, 0, 1];
const MT_TURN = [0.35, 0, 0, 0, 0.35];

Deno.test("mt_grpo: turn advantage before the first tool result, outcome after, combined without a result", () => {
  for (const coef of [1, 0.5]) {
    const scored = scoredTable(MT, MT_REWARD, { turnReward: MT_TURN });
    const { table, summary } = mask(
      testSession({ mask: config({ estimator: "mt_grpo", turn_coef: coef }) }),
      scored,
    );
    const o = 0.5 / (STD0 + EPS); // outcome rewards 1, 0, 1, 0
    // Turn rewards 0.35, 0, 0, 0: mean 0.0875, deviations 0.2625, -0.0875 x3, std sqrt(0.091875 / 3) = 0.175.
    const t0 = 0.2625 / (0.175 + EPS);
    const t1 = -0.0875 / (0.175 + EPS);
    // Combined 1.35, 0, 1, 0: mean 0.5875, std sqrt(1.441875 / 3).
    const cs = Math.sqrt(1.441875 / 3) + EPS;
    close(perEpisode(table), [
      [o + coef * t0, o], // turn 1 (before the result), then turn 2
      [-o + coef * t1, -o],
      [0.4125 / cs],
      [-0.5875 / cs],
      [0], // a group of one: everything 0
    ]);
    assert.equal(summary.metrics.frac_zero_std_groups, 1 / 2);
  }
});

Deno.test("mt_grpo refuses a scored file without turn_reward", () => {
  assert.throws(
    () => mask(testSession({ mask: config({ estimator: "mt_grpo" }) }), scoredTable(MT, MT_REWARD)),
    (e) => e instanceof UserError && /column "turn_reward".*re-run stage score/.test(e.message),
  );
});

Deno.test("mt_grpo_turns normalizes each turn's reward over the group's episodes that reached that turn", () => {
  const specs: EpisodeSpec[] = [
    { group: 0, turns: [{ text: "a", calls: [{ status: "ok" }] }, { text: "b" }] },
    {
      group: 0,
      turns: [{ text: "a", calls: [{ status: "tool_error" }] }, { text: "b", user: "go" }, { text: "c" }],
    },
    { group: 0, turns: [{ text: "a", user: "go" }, { text: "b" }] },
  ];
  const turnRewards = [[1, 0], [0, 0, 1], [0, 0]];
  const scored = scoredTable(specs, [1, 0, 0], { turnRewards });
  const { table } = mask(
    testSession({ mask: config({ estimator: "mt_grpo_turns", turn_coef: 0.5 }) }),
    scored,
  );
  // Outcome and turn 1 both 1, 0, 0: mean 1/3, std sqrt((4/9 + 2/9) / 2).
  const s = Math.sqrt((4 / 9 + 2 / 9) / 2) + EPS;
  const hi = (2 / 3) / s;
  const lo = (-1 / 3) / s;
  // Turn 2 rewards are all 0 (zero variance) and turn 3 is reached by one episode: both give 0.
  close(perEpisode(table), [[hi + 0.5 * hi, hi], [lo + 0.5 * lo, lo], [lo + 0.5 * lo, lo]]);
});

Deno.test("whiten leaves masked advantages with mean 0 and Bessel variance 1", () => {
  const { table } = mask(testSession({ mask: config({ whiten: true }) }), scoredTable(SPECS, REWARDS));
  const adv = table.getChild("advantages")!;
  const lm = table.getChild("loss_mask")!;
  const vals: number[] = [];
  for (let i = 0; i < table.numRows; i++) {
    const a = adv.get(i)!.toArray() as Float32Array;
    const m = lm.get(i)!.toArray() as Uint8Array;
    a.forEach((v, t) => m[t] ? vals.push(v) : assert.equal(v, 0));
  }
  const mean = vals.reduce((s, v) => s + v, 0) / vals.length;
  const variance = vals.reduce((s, v) => s + (v - mean) ** 2, 0) / (vals.length - 1);
  assert.ok(Math.abs(mean) < 1e-5 && Math.abs(variance - 1) < 1e-4, `${mean} ${variance}`);
});

Deno.test("a zero-row scored table gives a valid empty batch", () => {
  const { table, summary } = mask(
    testSession({ mask: config({ estimator: "mt_grpo_turns" }) }),
    scoredTable([], []),
  );
  assert.equal(table.numRows, 0);
  assert.ok(table.getChild("advantages") && table.getChild("loss_mask"));
  assert.equal(summary.episodes, 0);
});
