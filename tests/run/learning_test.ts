/**
 * "It learns" (as TRL's tiny-model tests): GRPO through the real loop — rollout, score, mask, train, the
 * adapter switched between steps — raises a toy reward by a clear margin within seconds. The model is a
 * tiny Qwen3 with the Qwen3 tokenizer pruned to a few hundred tokens (lib/demo/model.ts), the reward the
 * fraction of digits in the answer (tests/fixtures/digit_reward.ts): a random policy writes a few digits by
 * chance, GRPO must move probability onto the ten digit tokens.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../../lib/config/mod.ts";
import { generateArithmeticTasks } from "../../lib/data/arithmetic.ts";
import { buildDemoModel } from "../../lib/demo/model.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { runLoop } from "../../lib/run/loop.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

Deno.test("GRPO through the loop raises a toy reward by a clear margin", async () => {
  const dir = await Deno.makeTempDir({ prefix: "learning-" });
  const tasks = generateArithmeticTasks({
    numTasks: 20,
    seed: 0,
    minOperands: 2,
    maxOperands: 2,
    maxValue: 99,
  });
  const shape = { layers: 1, hidden: 64, heads: 4, kvHeads: 2, headDim: 16, intermediate: 128, seed: 0 };
  const model = await buildDemoModel(join(dir, "model"), shape, { tasks, systemPrompt: null, tools: [] });
  assert.equal((await loadTokenizer(model.dir)).decode([]), "", "a turn that stops at once decodes to ''");
  const { config, hash } = await loadConfig({
    overrides: [
      ["model.path", model.dir],
      ["data.arithmetic.num_tasks", "20"],
      ["data.arithmetic.max_operands", "2"],
      ["data.arithmetic.max_value", "99"],
      ["data.system_prompt", "null"],
      ["rollout.group_size", "8"],
      ["rollout.tasks_per_step", "4"],
      ["rollout.generation.max_new_tokens", "12"],
      ["rollout.generation.max_total_tokens", "256"],
      ["rollout.generation.enable_thinking", "false"],
      ["rollout.tools.enabled", "[]"],
      ["score.rewards", "{format: 0.0}"],
      ["score.modules", `[${join(ROOT, "tests/fixtures/digit_reward.ts")}]`],
      ["score.module_weights", "[1.0]"],
      ["train.lora.r", "8"],
      ["train.lora.alpha", "16"],
      ["train.optimizer.lr", "0.02"],
      ["loop.steps", "12"],
      ["loop.eval_every", "0"],
      ["loop.run_dir", join(dir, "run")],
      ["eval.num_tasks", "4"],
    ],
  });
  await runLoop(config, hash, { resume: false, showProgress: false });
  const metrics = await readStageFile(join(dir, "run", "metrics.arrow"), "run_metrics");
  const reward = Array.from(metrics.vector("reward_mean").toArray() as Float64Array);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const [first, last] = [mean(reward.slice(0, 3)), mean(reward.slice(-3))];
  assert.ok(
    last > first + 0.3,
    `mean reward ${first.toFixed(3)} (steps 1-3) -> ${last.toFixed(3)} (steps 10-12)`,
  );
});
