/**
 * Rollout speed against the engine's raw speed, in one process on one loaded policy: the same prompts
 * (arithmetic tasks rendered with the calculator offered, as the rollout renders them), the same batch
 * size, the same sampling and stop token. Raw: one `policy.generate` over the batch. Rollout: the rollout
 * stage's episodes (environment, tool-call parsing and tools, continuous batching, provenance). Reported
 * as generated tokens per second of wall time, best of `--repeats`, and their ratio.
 *
 *   deno run -A bench/rollout_bench.ts --model=DIR [--batch=8] [--new=64] [--repeats=3]
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { loadConfig } from "../lib/config/mod.ts";
import { generateArithmeticTasks } from "../lib/data/arithmetic.ts";
import { openSession, rollout } from "../lib/pipeline/mod.ts";
import { promptMessages } from "../lib/rollout/environment.ts";
import { toolSpecs } from "../lib/tools/registry.ts";

const args = parseArgs(Deno.args, { string: ["model", "batch", "new", "repeats"] }).values;
const model = String(args.model);
const batch = Number(args.batch ?? 8);
const maxNew = Number(args.new ?? 64);
const repeats = Number(args.repeats ?? 3);

const { config, hash } = await loadConfig({
  overrides: [
    ["model.path", model],
    ["rollout.group_size", "2"],
    ["rollout.max_batch", String(batch)],
    ["rollout.tasks_per_step", String(batch / 2)],
    ["rollout.generation.max_new_tokens", String(maxNew)],
    ["rollout.generation.max_total_tokens", String(maxNew + 1024)],
    ["rollout.tools.enabled", "[calculator]"],
  ],
});
const session = openSession(config, hash, { showProgress: false });
const tokenizer = await session.tokenizer();
const tools = await session.tools();
// Groups of two episodes per task (the rollout's group sampling), so `batch` episodes from batch / 2 tasks.
const tasks = generateArithmeticTasks({
  numTasks: batch / 2,
  seed: 1,
  minOperands: 2,
  maxOperands: 4,
  maxValue: 9999,
});
const g = config.rollout.generation;
const prompts = tasks.flatMap((t) => [t, t]).map((t) =>
  tokenizer.renderChatTokens(promptMessages(t, config.data.system_prompt), {
    tools: toolSpecs([...tools.values()]),
    enableThinking: g.enable_thinking,
    addGenerationPrompt: true,
  })
);
const policy = await session.policy();

async function raw(): Promise<number> {
  const started = performance.now();
  const out = await policy.generate(prompts, {
    maxNewTokens: maxNew,
    temperature: g.temperature,
    stopTokens: [tokenizer.eosTokenId],
    seeds: prompts.map((_, i) => i),
  });
  return out.reduce((n, o) => n + o.tokens.length, 0) / ((performance.now() - started) / 1000);
}

async function episodes(): Promise<number> {
  const out = await rollout(session, tasks, { step: 0 });
  return out.summary.tokensPerSecond;
}

const best = { raw: 0, rollout: 0 };
await raw(); // warm-up
for (let r = 0; r < repeats; r++) {
  best.raw = Math.max(best.raw, await raw());
  best.rollout = Math.max(best.rollout, await episodes());
}
await session.close();
console.log(JSON.stringify({
  model,
  batch,
  new_tokens: maxNew,
  raw_tokens_per_s: best.raw,
  rollout_tokens_per_s: best.rollout,
  ratio: best.rollout / best.raw,
}));
