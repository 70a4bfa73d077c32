/**
 * The multi-step demo's warm-start traces (configs/demo_multistep.yaml): with a calculator that does one
 * operation per call, the teacher's calculator traces make one call per step of `(a op b) op c` — the
 * second call's expression starting with the first call's result, as the tool returned it — then answer
 * with the last result; both calls succeed and the trace is correct. Direct traces answer at once, wrongly.
 * A recovery trace, written besides the others for a share of the calculator traces' tasks, writes one
 * call broken first: the tool's error follows, then the call written right; the broken turn has no loss.
 * The copy phase's pool is the traces that call the calculator, read from the traces themselves. The warm
 * start's probe gives each turn's first token as those traces have it (forced_start.ts).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import type { Config } from "../../lib/config/schema.ts";
import type { WarmStartSettings } from "../../lib/demo/settings.ts";
import { loadTasks, type Task } from "../../lib/data/mod.ts";
import { operationSteps } from "../../lib/data/arithmetic_steps.ts";
import { buildDemoModel } from "../../lib/demo/model.ts";
import { demoSettings } from "../../lib/demo/settings.ts";
import {
  brokenCallText,
  calculatorCalls,
  recoveryPlans,
  tracePlans,
  writeWarmStartBatch,
} from "../../lib/demo/traces.ts";
import { mulberry32 } from "../../lib/data/random.ts";
import { parseToolCalls } from "../../lib/rollout/tool_calls.ts";
import { tracePools, warmStartConfig } from "../../lib/demo/warm_start.ts";
import { openSession, rollout } from "../../lib/pipeline/mod.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { loadTools, toolSpecs } from "../../lib/tools/registry.ts";
import { forcedStartPolicy } from "../../lib/demo/forced_start.ts";
import { TeacherPolicy } from "../../lib/demo/teacher.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import { fileURLToPath } from "node:url";

const MULTISTEP = fileURLToPath(new URL("../../configs/demo_multistep.yaml", import.meta.url));

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

/** Writes the warm start's trace batch for `tasks` under `root` with `settings`; its path and the plans. */
async function writeTraces(
  { config, hash, root }: { config: Config; hash: string; root: string },
  tasks: Task[],
  settings: WarmStartSettings,
) {
  const plans = tracePlans(tasks, settings, config.rollout.tools.calculator.max_operations);
  const session = openSession(warmStartConfig(config, settings), hash, {
    adapter: null,
    showProgress: false,
  });
  try {
    return { plans, path: await writeWarmStartBatch({ session, tasks, settings, dir: root }) };
  } finally {
    await session.close();
  }
}

/** The multi-step warm-start settings with 16 traces, 8 per step, and `more`. */
function sixteenTraces(config: Config, more: Partial<WarmStartSettings>): WarmStartSettings {
  return { ...demoSettings(config).warmStart, traces: 16, tracesPerStep: 8, ...more };
}

Deno.test("multi-step traces make two successful calls, the second fed the first result, then answer right", async () => {
  const setup = await multistepSetup();
  const { config, tasks, tokenizer } = setup;
  const settings = sixteenTraces(config, { directFraction: 0.25, recoveryFraction: 0 });
  const { plans, path } = await writeTraces(setup, tasks, settings);
  const rollouts = await readStageFile(path.replace(/batch\.arrow$/, "rollouts.arrow"), "rollouts");
  const batch = await readStageFile(path, "batch");
  let tool = 0;
  for (let row = 0; row < batch.rows; row++) {
    const task = tasks[row];
    const calls = rollouts.column("tool_calls")[row] as Array<{ status: string }>;
    const trained = tokenizer.decode(
      [...batch.listAt("tokens", row)].filter((_, t) => batch.listAt("loss_mask", row)[t]),
    );
    if (plans.get(task.id)!.kind === "direct") {
      assert.equal(calls.length, 0);
      assert.equal(batch.vector("correct").get(row), false);
      continue;
    }
    tool++;
    const [first, second] = operationSteps(task.meta!.expression as string);
    assert.deepEqual(calls.map((c) => c.status), ["ok", "ok"], task.meta!.expression as string);
    assert.ok(trained.includes(`"expression": "${first.expression}"`), trained);
    assert.ok(second.expression.startsWith(`${first.result} `));
    assert.ok(trained.includes(`"expression": "${second.expression}"`), trained);
    assert.ok(trained.endsWith(`Final answer: ${task.answer}<|im_end|>`), trained);
    assert.equal(batch.vector("correct").get(row), true);
  }
  assert.equal(batch.rows, 16);
  assert.ok(tool >= 8, `${tool} calculator traces`);
});

Deno.test("brokenCallText: every broken call fails to parse, and its expression is the call's, broken", () => {
  const rng = mulberry32(3);
  for (let k = 0; k < 200; k++) {
    const expression = ["12 + 3", "4 * 8", "-1 - 7", "81 / 9"][k % 4];
    const text = brokenCallText(expression, rng);
    const [call] = parseToolCalls(text);
    assert.equal(call?.ok, false, text);
    assert.ok(text.includes('"expression": "'), text);
    // What the expression's place holds, quotes and cut aside, is the expression's start or the whole of it.
    const written = text.slice(text.indexOf('"expression": "') + 15).replace('": "', "").replace(
      /"}}\n<\/tool_call>$/,
      "",
    );
    assert.ok(expression.startsWith(written) && written.length > 0, text);
  }
});

Deno.test("recoveryPlans: a share of the calculator traces' tasks, the same calls with one broken first", async () => {
  const { config } = await loadConfig({ file: MULTISTEP, overrides: [["data.arithmetic.num_tasks", "600"]] });
  const tasks = await loadTasks(config.data);
  const settings = { ...demoSettings(config).warmStart, seed: 4, directFraction: 0.6, recoveryFraction: 0.5 };
  const plans = tracePlans(tasks, settings, 1);
  const recovery = recoveryPlans(tasks, plans, settings);
  const tool = tasks.filter((task) => plans.get(task.id)!.kind === "tool");
  for (const [id, plan] of recovery) {
    const base = plans.get(id)!;
    assert.ok(base.kind === "tool" && base.broken === undefined, "only calculator traces' tasks get one");
    assert.deepEqual(plan.calls, base.calls);
    assert.ok(plan.broken && [0, 1].includes(plan.broken.at));
    assert.equal(parseToolCalls(plan.broken.text)[0].ok, false, plan.broken.text);
  }
  assert.ok(Math.abs(recovery.size / tool.length - 0.5) < 0.08, `${recovery.size} of ${tool.length}`);
  assert.equal(recoveryPlans(tasks, plans, { ...settings, recoveryFraction: 0 }).size, 0);
});

Deno.test("recovery traces: written besides the others; the broken call fails, its turn has no loss, the call is written again", async () => {
  const setup = await multistepSetup();
  const { config, tasks, tokenizer } = setup;
  const settings = sixteenTraces(config, { directFraction: 0.25, recoveryFraction: 1 });
  const { plans, path } = await writeTraces(setup, tasks, settings);
  const recovery = recoveryPlans(tasks, plans, settings);
  const batch = await readStageFile(path, "batch");
  const withRecovery = tasks.filter((task) => recovery.has(task.id));
  assert.equal(batch.rows, 16 + withRecovery.length, "every plain trace, then the recovery traces");
  assert.ok(withRecovery.length >= 8, `${withRecovery.length} recovery traces`);
  assert.deepEqual(batch.column("task_id").slice(16), withRecovery.map((task) => task.id));
  assert.equal(new Set(batch.column("episode_id")).size, batch.rows, "episode ids differ");
  assert.equal(new Set(batch.column("group_id")).size, batch.rows, "one group per trace");
  const atSeen = new Set<number>();
  for (let i = 16; i < batch.rows; i++) {
    const task = withRecovery[i - 16];
    const plan = recovery.get(task.id)!;
    atSeen.add(plan.broken!.at);
    const calls = batch.column("tool_calls")[i] as Array<{ status: string; turn: number }>;
    const statuses = ["ok", "ok"];
    statuses.splice(plan.broken!.at, 0, "invalid_tool_call");
    assert.deepEqual(calls.map((c) => c.status), statuses);
    const [tokens, lossMask, turns] = ["tokens", "loss_mask", "turn_idx"].map((c) => [...batch.listAt(c, i)]);
    const trainedIn = (turn: number) => tokens.filter((_, t) => turns[t] === turn && lossMask[t]);
    const brokenTurn = calls[plan.broken!.at].turn;
    assert.equal(trainedIn(brokenTurn).length, 0, "the broken call's turn is not trained");
    for (const turn of [1, 2, 3, 4].filter((t) => t !== brokenTurn)) {
      assert.ok(trainedIn(turn).length > 0, `turn ${turn} is trained`);
    }
    const all = tokenizer.decode(tokens);
    assert.ok(all.includes(plan.broken!.text), "the broken call is in the context");
    assert.ok(all.includes("Error: invalid tool call"), "its error is in the context");
    const trained = tokenizer.decode(tokens.filter((_, t) => lossMask[t]));
    for (const expression of plan.calls) {
      assert.ok(trained.includes(`"expression": "${expression}"`), trained);
    }
    assert.ok(trained.endsWith(`Final answer: ${task.answer}<|im_end|>`), trained);
    assert.equal(batch.vector("correct").get(i), true);
  }
  assert.deepEqual([...atSeen].sort(), [0, 1], "both calls are broken in some trace");
  // The copy phase trains on the plain calculator traces alone; the mix phase on every row.
  const pools = tracePools(batch);
  const plainTool = tasks.flatMap((task, row) => plans.get(task.id)!.kind === "tool" ? [row] : []);
  assert.deepEqual(pools.tool, plainTool);
  assert.deepEqual(pools.all, [...Array(batch.rows).keys()]);
});

Deno.test("the copy phase's pool is the rows that call the calculator, also when tasks share a prompt", async () => {
  const setup = await multistepSetup();
  const { config, tasks } = setup;
  // The generator repeats problems: the teacher writes a repeated prompt's trace from its first task's plan.
  const repeated = [...tasks, ...tasks.slice(0, 8).map((task) => ({ ...task, id: `${task.id}-again` }))];
  const settings = {
    ...demoSettings(config).warmStart,
    traces: repeated.length,
    directFraction: 0.5,
    recoveryFraction: 0,
  };
  const { plans, path } = await writeTraces(setup, repeated, settings);
  const batch = await readStageFile(path, "batch");
  const calls = batch.column("tool_calls") as Array<unknown[]>;
  const ids = batch.column("task_id") as string[];
  const withCalls = ids.flatMap((_, row) => calls[row].length > 0 ? [row] : []);
  const planSaysTool = ids.flatMap((id, row) => plans.get(id)!.kind === "tool" ? [row] : []);
  assert.notDeepEqual(planSaysTool, withCalls, "some repeated task's own plan differs from its trace");
  assert.deepEqual(tracePools(batch).tool, withCalls);
});

Deno.test("recovery traces need a spare turn: max_turns too small for them is refused before any trace", async () => {
  const { config, hash, tasks, root } = await multistepSetup();
  config.rollout.environment.max_turns = 3;
  const settings = { ...demoSettings(config).warmStart, traces: 8, recoveryFraction: 0.5 };
  const session = openSession(warmStartConfig(config, settings), hash, {
    adapter: null,
    showProgress: false,
  });
  try {
    await assert.rejects(
      writeWarmStartBatch({ session, tasks, settings, dir: root }),
      /max_turns: 3.*4 assistant turns.*set rollout\.environment\.max_turns to 4/s,
    );
    await assert.rejects(Deno.stat(join(root, "traces")), Deno.errors.NotFound);
  } finally {
    await session.close();
  }
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
    const turns = episode.messages.filter((m) => m.role === "assistant");
    assert.equal(turns.length, 3);
    // Each call is in tool_calls, not also in content (OpenAI's convention).
    const called = turns.slice(0, 2).every((m) => m.tool_calls?.length === 1 && m.content === "");
    assert.ok(called, JSON.stringify(turns));
    assert.equal(turns[2].content, `Final answer: ${tasks[i].answer}`);
    assert.deepEqual(episode.toolCalls.map((c) => c.status), ["ok", "ok"]);
  }
});
