/**
 * `mask.estimator: gae` on hand-built scored files with per-token `values`: advantages and returns equal
 * this file's own float64 sums (A_k = Σ_l (γλ)^l δ_{k+l}, written out rather than recursed, R = A + V) for
 * `gae_unit` token and turn, γ < 1 and λ < 1, with an episode cut by the token limit, one whose last
 * tokens are a tool result, and a one-token turn; values on untrained tokens must not matter. A file
 * without `values` is refused naming the column and the stage that writes it.
 */
import assert from "node:assert/strict";
import { buildTable, listFromArrays, readStageFile } from "../../lib/arrow/mod.ts";
import { writeTable } from "../../lib/arrow/stage_io.ts";
import { defaultConfig, type MaskConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { mask } from "../../lib/pipeline/mod.ts";
import { type EpisodeSpec, rolloutColumns, scoredTable } from "../fixtures/rollouts.ts";
import { mulberry32 } from "../reference/weights.ts";
import { testSession } from "../helpers/session.ts";

const GAMMA = 0.9;
const LAM = 0.8;

const call = { status: "ok", output: "7" };
const SPECS: EpisodeSpec[] = [
  // two turns with a tool result between them
  { group: 0, turns: [{ text: "ab", calls: [call] }, { text: "cd" }] },
  // a one-token turn (only <|im_end|>), a user turn, then a three-token turn
  { group: 0, turns: [{ text: "", user: "go on" }, { text: "xy" }] },
  // cut by the token limit mid-turn: no <|im_end|>, finish_reason length
  { group: 1, turns: [{ text: "abcd", stopped: false }], finish: "length" },
  // cut by the turn limit: the episode ends on a tool result (untrained tokens)
  { group: 1, turns: [{ text: "a", calls: [call] }, { text: "bc", calls: [call] }], finish: "truncated" },
];
const REWARDS = [1, 0.25, -0.5, 0.75];

/** Values on every token (untrained ones too, which gae must skip), seeded. */
function valuesFor(specs: EpisodeSpec[]): Float32Array[] {
  const rand = mulberry32(7);
  const tokens = rolloutColumns(specs).tokens;
  return Array.from(
    { length: specs.length },
    (_, i) => Float32Array.from(tokens.at(i), () => Math.round((rand() * 2 - 1) * 1000) / 1000),
  );
}

function scoredWithValues(specs: EpisodeSpec[], rewards: number[], values: Float32Array[]) {
  const scored = scoredTable(specs, rewards);
  const columns: Record<string, unknown> = {};
  for (const f of scored.schema.fields) columns[f.name] = scored.getChild(f.name)!;
  return buildTable("fixture", "scored", { ...columns, values: listFromArrays(values) } as never, {
    config_hash: "fixture",
    input_hashes: {},
  });
}

const config = (o: Partial<MaskConfig>): MaskConfig => ({
  ...defaultConfig().mask,
  estimator: "gae",
  gamma: GAMMA,
  lam: LAM,
  ...o,
});

/** Σ_{l ≥ 0} (γλ)^l δ_{k+l} with δ_k = r_k + γ V_{k+1} − V_k, V_{n+1} = 0, in float64, no recursion. */
function expectedChain(v: number[], reward: number) {
  const n = v.length;
  const delta = v.map((vk, k) => (k === n - 1 ? reward : 0) + GAMMA * (k + 1 < n ? v[k + 1] : 0) - vk);
  const adv = v.map((_, k) => {
    let sum = 0;
    for (let l = 0; k + l < n; l++) sum += (GAMMA * LAM) ** l * delta[k + l];
    return sum;
  });
  return { adv, ret: adv.map((a, k) => a + v[k]) };
}

/** Expected per-token advantages and returns of one episode, from its mask, turns and values. */
function expectedEpisode(
  mask: Uint8Array,
  turn: Int16Array,
  values: Float32Array,
  reward: number,
  unit: string,
) {
  const trained = Array.from(mask.keys()).filter((t) => mask[t] === 1);
  const steps: number[][] = [];
  for (const t of trained) {
    const same = unit === "turn" && steps.length > 0 && turn[steps.at(-1)![0]] === turn[t];
    if (same) steps.at(-1)!.push(t);
    else steps.push([t]);
  }
  const chain = expectedChain(steps.map((s) => values[s.at(-1)!]), reward);
  const adv = new Array<number>(mask.length).fill(0), ret = new Array<number>(mask.length).fill(0);
  steps.forEach((s, k) => s.forEach((t) => [adv[t], ret[t]] = [chain.adv[k], chain.ret[k]]));
  return { adv, ret, steps: steps.length };
}

for (const unit of ["token", "turn"] as const) {
  Deno.test(`gae (${unit}) advantages and returns equal the float64 sums; untrained tokens get 0`, () => {
    const values = valuesFor(SPECS);
    const { table } = mask(
      testSession({ mask: config({ gae_unit: unit }) }),
      scoredWithValues(SPECS, REWARDS, values),
    );
    const turns = rolloutColumns(SPECS).turn_idx;
    const stepCounts: number[] = [];
    for (let i = 0; i < SPECS.length; i++) {
      const m = table.getChild("loss_mask")!.get(i)!.toArray() as Uint8Array;
      const want = expectedEpisode(m, turns.at(i) as Int16Array, values[i], REWARDS[i], unit);
      stepCounts.push(want.steps);
      const adv = table.getChild("advantages")!.get(i)!.toArray() as Float32Array;
      const ret = table.getChild("returns")!.get(i)!.toArray() as Float32Array;
      for (let t = 0; t < m.length; t++) {
        assert.ok(
          Math.abs(adv[t] - want.adv[t]) <= 1e-5,
          `${unit} episode ${i} token ${t}: A ${adv[t]} vs ${want.adv[t]}`,
        );
        assert.ok(
          Math.abs(ret[t] - want.ret[t]) <= 1e-5,
          `${unit} episode ${i} token ${t}: R ${ret[t]} vs ${want.ret[t]}`,
        );
      }
    }
    // The fixtures hold what the test names: a one-token turn, several steps per episode.
    assert.deepEqual(stepCounts, unit === "turn" ? [2, 2, 1, 2] : [6, 4, 4, 5]);
  });
}

Deno.test("gae: mask_truncated zeroes the cut episode's advantages and returns; whiten leaves returns alone", () => {
  const values = valuesFor(SPECS);
  const scored = scoredWithValues(SPECS, REWARDS, values);
  const plain = mask(testSession({ mask: config({}) }), scored).table;
  const cut = mask(testSession({ mask: config({ mask_truncated: true }) }), scored).table;
  for (const i of [2, 3]) {
    assert.ok((cut.getChild("advantages")!.get(i)!.toArray() as Float32Array).every((v) => v === 0));
    assert.ok((cut.getChild("returns")!.get(i)!.toArray() as Float32Array).every((v) => v === 0));
  }
  const whitened = mask(testSession({ mask: config({ whiten: true }) }), scored).table;
  assert.deepEqual(
    Array.from(whitened.getChild("returns")!.data[0].children[0].values as Float32Array),
    Array.from(plain.getChild("returns")!.data[0].children[0].values as Float32Array),
  );
  assert.notDeepEqual(
    Array.from(whitened.getChild("advantages")!.data[0].children[0].values as Float32Array),
    Array.from(plain.getChild("advantages")!.data[0].children[0].values as Float32Array),
  );
});

Deno.test("gae refuses a scored file without values in one line naming the column and the rollout stage", () => {
  assert.throws(
    () => mask(testSession({ mask: config({}) }), scoredTable(SPECS, REWARDS)),
    (e) =>
      e instanceof UserError && /column "values"/.test(e.message) && /re-run stage rollout/.test(e.message) &&
      /gae/.test(e.message) && !e.message.includes("\n"),
  );
});

Deno.test("a values column must have one finite entry per token: the reader refuses it naming the row", async () => {
  const dir = await Deno.makeTempDir({ prefix: "gae-values-" });
  const values = valuesFor(SPECS);
  const bad = [values[0], values[1].slice(1), values[2], values[3]];
  const table = scoredWithValues(SPECS, REWARDS, bad);
  const path = `${dir}/scored.arrow`;
  await writeTable(path, "scored", table);
  await assert.rejects(
    () => readStageFile(path, "scored"),
    (e) => e instanceof UserError && /column "values"/.test(e.message) && /row 1/.test(e.message),
  );
  const nan = [values[0], values[1], Float32Array.from(values[2], () => NaN), values[3]];
  await writeTable(path, "scored", scoredWithValues(SPECS, REWARDS, nan));
  await assert.rejects(
    () => readStageFile(path, "scored"),
    (e) => e instanceof UserError && /column "values"/.test(e.message),
  );
});
