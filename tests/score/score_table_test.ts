/**
 * The score stage on hand-built rollouts: reward components and statuses, the weighted sum, correct,
 * turn rewards, a custom module, zero rows, and the CLI writing a scored file the mask stage reads.
 */
import assert from "node:assert/strict";
import { mask, score } from "../../lib/pipeline/mod.ts";
import { testSession } from "../helpers/session.ts";
import { defaultConfig, type ScoreConfig } from "../../lib/config/mod.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import { writeTable } from "../../lib/arrow/stage_io.ts";
import { UserError } from "../../lib/errors.ts";
import { exactMatch, normalizeAnswer } from "../../lib/score/exact_match.ts";
import { formatStatus } from "../../lib/score/format.ts";
import { type EpisodeSpec, rolloutsTable } from "../fixtures/rollouts.ts";

const cfg = (o: Partial<ScoreConfig>): ScoreConfig => ({ ...defaultConfig().score, ...o });
const GSM = { answer: "4" };

const SPECS: EpisodeSpec[] = [
  // A tool call that worked, then the right answer.
  {
    group: 0,
    task: GSM,
    turns: [{
      text: '<think>use the tool</think>\n<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>',
      calls: [{ status: "ok", output: "4" }],
    }, { text: "#### 4" }],
  },
  // A failed tool call, then a wrong answer with text after it.
  {
    group: 0,
    task: GSM,
    turns: [{
      text: "call",
      calls: [{ status: "tool_error", output: "Error" }, { status: "ok", output: "1" }],
    }, { text: "#### 5\nBye" }],
  },
  // No answer at all, cut inside the turn.
  { group: 1, task: GSM, turns: [{ text: "<think>hmm", stopped: false }], finish: "length" },
];

Deno.test("score writes each component, its status, the weighted reward and correct", async () => {
  const config = cfg({ rewards: { gsm8k: 1, tool_use: 0.1, format: 0.5 } });
  const { table, summary } = await score(testSession({ score: config }), rolloutsTable(SPECS));
  const col = (name: string) => table.getChild(name)!.toArray();
  assert.deepEqual(Array.from(col("reward_gsm8k") as Float32Array), [1, 0, 0]);
  assert.deepEqual([...table.getChild("status_gsm8k")!], ["correct", "wrong", "no_answer"]);
  assert.deepEqual([...table.getChild("status_tool_use")!], ["used", "used", "no_call"]);
  assert.deepEqual([...table.getChild("status_format")!], ["ok", "text_after_answer", "truncated"]);
  assert.deepEqual(Array.from(col("reward") as Float32Array), [
    Math.fround(1 + 0.1 + 0.5),
    Math.fround(0.1),
    0,
  ]);
  assert.deepEqual([...table.getChild("correct")!], [true, false, false]);
  assert.equal(summary.accuracy, 1 / 3);
  assert.equal(summary.components.gsm8k, 1 / 3);
});

Deno.test("turn rewards follow each turn's tool-call statuses; the episode turn reward is verl-tool's", async () => {
  const config = cfg({
    turn_reward: { tool_success: 1, tool_error: -0.5, no_tool: 0.25, success_rate: 0.3, per_success: 0.05 },
  });
  const { table } = await score(testSession({ score: config }), rolloutsTable(SPECS));
  const turns = table.getChild("turn_rewards")!;
  assert.deepEqual(Array.from(turns.get(0)!.toArray()), [1, 0.25]);
  assert.deepEqual(Array.from(turns.get(1)!.toArray()), [-0.5, 0.25]);
  assert.deepEqual(Array.from(turns.get(2)!.toArray()), [0.25]);
  const episode = Array.from(table.getChild("turn_reward")!.toArray() as Float32Array);
  // Episode 0: 1 of 1 succeeded; episode 1: 1 of 2 ran and succeeded; episode 2: no calls.
  assert.deepEqual(episode, [Math.fround(0.3 + 0.05), Math.fround(0.3 * 0.5 + 0.05), 0]);
});

Deno.test("a custom reward module by path joins the weighted sum", async () => {
  const config = cfg({ rewards: { gsm8k: 1 }, modules: ["examples/custom_reward.ts"], module_weights: [2] });
  const { table } = await score(testSession({ score: config }), rolloutsTable(SPECS));
  assert.deepEqual([...table.getChild("status_brevity")!], ["short", "short", "short"]);
  assert.deepEqual(Array.from(table.getChild("reward")!.toArray() as Float32Array), [3, 2, 2]);
});

Deno.test("bad module config and a task without an answer are one-line UserErrors, not zeros", async () => {
  const mismatch = cfg({ modules: ["examples/custom_reward.ts"], module_weights: [] });
  await assert.rejects(() => score(testSession({ score: mismatch }), rolloutsTable(SPECS)), UserError);
  const noAnswer = rolloutsTable([{ group: 0, turns: [{ text: "#### 4" }] }]);
  await assert.rejects(
    () => score(testSession({ score: cfg({}) }), noAnswer),
    (e) => e instanceof UserError && /no numeric answer/.test(e.message),
  );
});

Deno.test("exact_match and format follow their documented rules", () => {
  assert.equal(normalizeAnswer("The  Eiffel Tower!"), "eiffel tower");
  const ep = (finalText: string) => ({ finalText, task: { answer: "Paris" } }) as never;
  assert.equal(
    (exactMatch.score(ep("Final answer: paris."), { codeTimeoutMs: 0 }) as { value: number }).value,
    1,
  );
  assert.equal((exactMatch.score(ep("Lyon"), { codeTimeoutMs: 0 }) as { value: number }).value, 0);
  assert.equal(formatStatus(["<think>a</think>x <think>b</think>"], "stop"), "bad_think");
  assert.equal(formatStatus(["<think>never closed"], "stop"), "unclosed_think");
  assert.equal(formatStatus(["text <think>late</think>"], "stop"), "bad_think");
  assert.equal(formatStatus(['<tool_call>{"name": ', "#### 1"], "stop"), "bad_tool_call");
  assert.equal(formatStatus(["<think>x</think>\n\\boxed{2}."], "stop"), "ok");
});

Deno.test("zero rollouts give a valid empty scored table", async () => {
  const { table, summary } = await score(
    testSession({ score: cfg({ rewards: { code_exec: 1 } }) }),
    rolloutsTable([]),
  );
  assert.equal(table.numRows, 0);
  assert.ok(table.getChild("reward") && table.getChild("turn_rewards") && table.getChild("correct"));
  assert.equal(summary.episodes, 0);
});

Deno.test("a scored file written by the stage reads back and feeds the mask stage", async () => {
  const dir = await Deno.makeTempDir();
  const { table } = await score(testSession({ score: cfg({}) }, "abc"), rolloutsTable(SPECS));
  await writeTable(`${dir}/scored.arrow`, "scored", table);
  const scored = await readStageFile(`${dir}/scored.arrow`, "scored");
  assert.equal(scored.metadata.config_hash, "abc");
  assert.deepEqual(scored.column("status_gsm8k"), ["correct", "wrong", "no_answer"]);
  const batch = mask(testSession({ mask: { ...defaultConfig().mask, estimator: "mt_grpo" } }), scored);
  await writeTable(`${dir}/batch.arrow`, "batch", batch.table);
  const read = await readStageFile(`${dir}/batch.arrow`, "batch");
  assert.ok(read.has("turn_reward") && read.has("advantages"));
  assert.equal(read.metadata.input_hashes?.rollouts, "");
  assert.equal(read.metadata.input_hashes?.scored, scored.sha256);
  await Deno.remove(dir, { recursive: true });
});
