/**
 * The multi-step demo's warm-start traces (configs/demo_multistep.yaml): with a calculator that does one
 * operation per call, the teacher's calculator traces make one call per step of `(a op b) op c` — the
 * second call's expression starting with the first call's result, as the tool returned it — then answer
 * with the last result; both calls succeed and the trace is correct. Direct traces answer at once, wrongly.
 * The warm start's probe gives each turn's first token as those traces have it (forced_start.ts).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { loadTasks, type Task } from "../../lib/data/mod.ts";
import { operationSteps } from "../../lib/data/arithmetic_steps.ts";
import { buildDemoModel } from "../../lib/demo/model.ts";
import { demoSettings } from "../../lib/demo/settings.ts";
import { calculatorCalls, tracePlans, writeWarmStartBatch } from "../../lib/demo/traces.ts";
import { warmStartConfig } from "../../lib/demo/warm_start.ts";
import { openSession, rollout } from "../../lib/pipeline/mod.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { loadTools, toolSpecs } from "../../lib/tools/registry.ts";
import { forcedStartPolicy } from "../../lib/demo/forced_start.ts";
import { TeacherPolicy } from "../../lib/demo/teacher.ts";
import type { Policy } from "../../lib/engine/policy.ts";

const MULTISTEP = new URL("../../configs/demo_multistep.yaml", import.meta.url).pathname;

Deno.test("calculatorCalls: the whole expression, or one call per step when the calculator is limited", () => {
  const task: Task = {
    id: "t",
    source: "arithmetic",
    prompt: "",
    answer: "20",
    meta: { expression: "(7 - 3) * 5" },
  };
  assert.deepEqual(calculatorCalls(task, null), ["(7 - 3) * 5"]);
  assert.deepEqual(calculatorCalls(task, 2), ["(7 - 3) * 5"]);
  assert.deepEqual(calculatorCalls(task, 1), ["7 - 3", "4 * 5"]);
});

/** Multi-step config, 16 tasks, a tiny demo model and its tokenizer. */
async function multistepSetup() {
  const { config, hash } = await loadConfig({
    file: MULTISTEP,
    overrides: [["data.arithmetic.num_tasks", "40"], ["eval.num_tasks", "8"]],
  });
  const tasks = (await loadTasks(config.data)).slice(0, 16);
  const tools = await loadTools(config.rollout.tools);
  const root = await Deno.makeTempDir({ prefix: "demo-multistep-" });
  const model = await buildDemoModel(
    join(root, "model"),
    { ...demoSettings(config).model, layers: 1, hidden: 32, headDim: 16 },
    { tasks, systemPrompt: config.data.system_prompt, tools: toolSpecs([...tools.values()]) },
  );
  config.model.path = model.dir;
  return { config, hash, tasks, tools, root, tokenizer: await loadTokenizer(model.dir) };
}

Deno.test("multi-step traces make two successful calls, the second fed the first result, then answer right", async () => {
  const { config, hash, tasks, root, tokenizer } = await multistepSetup();
  const settings = { ...demoSettings(config).warmStart, traces: 16, tracesPerStep: 8, directFraction: 0.25 };
  const plans = tracePlans(tasks, settings, config.rollout.tools.calculator.max_operations);
  const session = openSession(warmStartConfig(config, settings), hash, {
    adapter: null,
    showProgress: false,
  });
  const paths = [await writeWarmStartBatch({ session, tasks, settings, dir: root })];
  await session.close();
  let [row, tool] = [0, 0];
  for (const path of paths) {
    const rollouts = await readStageFile(path.replace(/batch\.arrow$/, "rollouts.arrow"), "rollouts");
    const batch = await readStageFile(path, "batch");
    for (let i = 0; i < batch.rows; i++, row++) {
      const task = tasks[row];
      const calls = rollouts.column("tool_calls")[i] as Array<{ status: string }>;
      const trained = tokenizer.decode(
        [...batch.listAt("tokens", i)].filter((_, t) => batch.listAt("loss_mask", i)[t]),
      );
      if (plans.get(task.id)!.kind === "direct") {
        assert.equal(calls.length, 0);
        assert.equal(batch.vector("correct").get(i), false);
        continue;
      }
      tool++;
      const [first, second] = operationSteps(task.meta!.expression as string);
      assert.deepEqual(calls.map((c) => c.status), ["ok", "ok"], task.meta!.expression as string);
      assert.ok(trained.includes(`"expression": "${first.expression}"`), trained);
      assert.ok(second.expression.startsWith(`${first.result} `));
      assert.ok(trained.includes(`"expression": "${second.expression}"`), trained);
      assert.ok(trained.endsWith(`Final answer: ${task.answer}<|im_end|>`), trained);
      assert.equal(batch.vector("correct").get(i), true);
    }
  }
  assert.equal(row, 16);
  assert.ok(tool >= 8, `${tool} calculator traces`);
});

Deno.test("the probe's policy gives each turn's first token: a call in turns 1..k, then the answer", async () => {
  const { config, hash, tasks, tools, tokenizer } = await multistepSetup();
  const calls = (task: Task) => calculatorCalls(task, 1);
  // A model that, given each turn's first token, writes the rest of the teacher's turn.
  const teacher = new TeacherPolicy(tokenizer, tasks, (task) => ({ kind: "tool", calls: calls(task) }));
  const continues: Policy = {
    config: teacher.config,
    adapterId: () => teacher.adapterId(),
    sequenceStats: () => teacher.sequenceStats(),
    logprobs: () => teacher.logprobs(),
    generate: () => teacher.generate(),
    startBatch: () => teacher.startBatch(),
    setAdapter: () => teacher.setAdapter(),
    close: () => teacher.close(),
    openSequence: async (prompt) => {
      const inner = await teacher.openSequence(prompt);
      return {
        ...inner,
        generate: async (g) => {
          const forced = (await inner.tokens()).at(-1)!; // the policy appended it before asking
          const out = await inner.generate({ ...g, maxNewTokens: g.maxNewTokens + 1 });
          assert.equal(out.tokens[0], forced, "the given first token is the teacher's first token");
          return { ...out, tokens: out.tokens.slice(1), logprobs: out.logprobs.slice(1) };
        },
      };
    },
  };
  const forced = forcedStartPolicy(continues, tokenizer, tasks, (task) => calls(task).length);
  const session = openSession(config, hash, {
    showProgress: false,
    open: { policy: forced, tokenizer, tools },
  });
  const out = await rollout(session, tasks.slice(0, 6), {
    step: 0,
    settings: { ...config.rollout, group_size: 1 },
  });
  for (const [i, episode] of out.episodes.entries()) {
    const turns = episode.messages.filter((m) => m.role === "assistant").map((m) => String(m.content));
    assert.equal(turns.length, 3);
    assert.ok(turns[0].startsWith("<tool_call>") && turns[1].startsWith("<tool_call>"), turns.join(" | "));
    assert.equal(turns[2], `Final answer: ${tasks[i].answer}`);
    assert.deepEqual(episode.toolCalls.map((c) => c.status), ["ok", "ok"]);
  }
});
