/**
 * Score (without code execution) + mask on a synthetic batch: by default 10,000 episodes of 2,000
 * tokens in groups of 8, two assistant turns each with a tool call between them. Times the two stage
 * functions in-process (what the loop calls) and, separately, writing batch.arrow.
 *
 *   deno run -A bench/score_mask_bench.ts [--episodes=10000] [--tokens=2000] [--write]
 *
 * Prints a line per phase and a JSON object last (bench/bench.ts reads it).
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { buildTable, FlatList, type MetadataInput } from "../lib/arrow/mod.ts";
import { defaultConfig } from "../lib/config/mod.ts";
import { writeTable } from "../lib/arrow/stage_io.ts";
import { mask, openSession, score } from "../lib/pipeline/mod.ts";

const META: MetadataInput = {
  config_hash: "bench",
  model: "bench",
  adapter: "",
  tokenizer_hash: "bench",
  chat_template_hash: "bench",
  sampling: {},
  seed: 0,
};

/** A rollouts table of `n` episodes × `len` tokens: prompt 200, turn 1, tool result 100, turn 2. */
function syntheticRollouts(n: number, len: number) {
  const offsets = Int32Array.from({ length: n + 1 }, (_, i) => i * len);
  const tokens = new Int32Array(n * len);
  const sampled = new Uint8Array(n * len);
  const logprobs = new Float32Array(n * len);
  const turnIdx = new Int16Array(n * len);
  const split = Math.floor(len / 2);
  for (let i = 0; i < n; i++) {
    for (let t = 0; t < len; t++) {
      const k = i * len + t;
      tokens[k] = 1000 + ((i * 31 + t) % 50000);
      const inTool = t >= split && t < split + 100;
      sampled[k] = t >= 200 && !inTool ? 1 : 0;
      logprobs[k] = sampled[k] ? -0.7 : 0;
      turnIdx[k] = t < 200 ? 0 : t < split + 100 ? 1 : 2;
    }
  }
  const think = "<think>\n" + "Let me work this out step by step. ".repeat(150) + "\n</think>\n\n";
  const text = (i: number) =>
    JSON.stringify([
      {
        role: "user",
        content: "Natalia sold clips to 48 of her friends in April, and then half as many in May?",
      },
      {
        role: "assistant",
        content: `${think}<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>`,
      },
      { role: "tool", name: "calculator", content: "72" },
      { role: "assistant", content: `${think}She sold 48 + 24 = 72 clips.\n#### ${i % 3 === 0 ? 72 : 70}` },
    ]);
  const rows = Array.from({ length: n }, (_, i) => i);
  return buildTable("bench", "rollouts", {
    episode_id: rows.map((i) => `e${i}`),
    task_id: rows.map((i) => `t${i >> 3}`),
    group_id: Int32Array.from(rows, (i) => i >> 3),
    sample_idx: Int32Array.from(rows, (i) => i & 7),
    task: rows.map((i) => JSON.stringify({ id: `t${i >> 3}`, source: "gsm8k", prompt: "q", answer: "72" })),
    prompt_messages: rows.map(() => "[]"),
    messages: rows.map(text),
    tokens: new FlatList(tokens, offsets),
    prompt_len: new Int32Array(n).fill(200),
    sampled: new FlatList(sampled, offsets),
    logprobs: new FlatList(logprobs, offsets),
    turn_idx: new FlatList(turnIdx, offsets),
    tool_calls: rows.map((
      i,
    ) => [{
      turn: 1,
      name: "calculator",
      arguments: "{}",
      status: i % 5 ? "ok" : "tool_error",
      output: "72",
      ms: 1,
    }]),
    num_turns: new Int16Array(n).fill(2),
    finish_reason: rows.map(() => "stop"),
    status: rows.map(() => "ok"),
    policy_version: rows.map(() => "bench"),
  }, META);
}

if (import.meta.main) {
  const { values } = parseArgs(Deno.args, { string: ["episodes", "tokens"], boolean: ["write"] });
  const n = Number(values.episodes ?? 10_000);
  const len = Number(values.tokens ?? 2_000);
  const rollouts = syntheticRollouts(n, len);
  const base = defaultConfig();
  const session = openSession({
    ...base,
    score: { ...base.score, rewards: { gsm8k: 1, tool_use: 0.1, format: 0.1 } },
    mask: { ...base.mask, estimator: "mt_grpo", whiten: true },
  }, "bench");
  const t0 = performance.now();
  const scored = await score(session, rollouts, { step: 0 });
  const t1 = performance.now();
  const batch = mask(session, scored, { step: 0 });
  const t2 = performance.now();
  let writeMs = NaN;
  if (values.write) {
    const dir = await Deno.makeTempDir();
    await writeTable(`${dir}/batch.arrow`, "batch", batch.table);
    writeMs = performance.now() - t2;
    await Deno.remove(dir, { recursive: true });
  }
  const result = {
    episodes: n,
    tokens_per_episode: len,
    score_s: (t1 - t0) / 1000,
    mask_s: (t2 - t1) / 1000,
    total_s: (t2 - t0) / 1000,
    write_batch_s: writeMs / 1000,
  };
  console.log(
    `score ${result.score_s.toFixed(2)} s, mask ${result.mask_s.toFixed(2)} s, ` +
      `total ${result.total_s.toFixed(2)} s for ${n} episodes x ${len} tokens` +
      (values.write ? `; writing batch.arrow ${result.write_batch_s.toFixed(2)} s` : ""),
  );
  console.log(JSON.stringify(result));
}
