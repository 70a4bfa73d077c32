/**
 * The demo's pieces before GRPO: the model directory (pruned Qwen3 tokenizer, matching vocabulary and
 * special ids), the teacher's traces through the real rollout (calculator calls with the task's
 * expression, the tool's exact result, direct wrong answers in the planned share), the warm-start
 * batch's loss mask (assistant turns only, never the tool response), the held-out split, and the warm
 * start itself (in one process, with its probes and the copy phase's stopping rule; its checkpoint starts
 * GRPO with a fresh optimizer state).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { generateArithmeticTasks } from "../../lib/data/arithmetic.ts";
import { splitHeldOut } from "../../lib/rollout/tasks.ts";
import { buildDemoModel } from "../../lib/demo/model.ts";
import { demoSettings } from "../../lib/demo/settings.ts";
import { defaultConfig } from "../../lib/config/validate.ts";
import {
  copyLr,
  mixLr,
  tracePlans,
  warmStart,
  warmStartConfig,
  writeWarmStartBatch,
} from "../../lib/demo/warm_start.ts";
import { openSession } from "../../lib/pipeline/mod.ts";
import type { WarmStartSettings } from "../../lib/demo/settings.ts";
import type { Config } from "../../lib/config/schema.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import { calculatorCallText, finalAnswerText } from "../../lib/demo/teacher.ts";
import { ScriptedPolicy } from "../helpers/scripted_policy.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { loadCheckpoint } from "../../lib/train/checkpoint.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { loadTools, toolSpecs } from "../../lib/tools/registry.ts";

const DEMO = demoSettings(defaultConfig());

const tasks = generateArithmeticTasks({
  numTasks: 24,
  seed: 3,
  minOperands: 2,
  maxOperands: 2,
  maxValue: 99,
});

async function setup() {
  const { config, hash } = await loadConfig({ file: "configs/demo.yaml" });
  const tools = await loadTools(config.rollout.tools);
  const root = await Deno.makeTempDir();
  const model = join(root, "model");
  const built = await buildDemoModel(model, { ...DEMO.model, layers: 1, hidden: 32, headDim: 16 }, {
    tasks,
    systemPrompt: config.data.system_prompt,
    tools: toolSpecs([...tools.values()]),
  });
  config.model.path = model;
  return { config, hash, tools, root, model, built, tokenizer: await loadTokenizer(model) };
}

Deno.test("buildDemoModel writes a Qwen3 whose vocabulary is the pruned tokenizer's, with its special ids", async () => {
  const { model, built, tokenizer } = await setup();
  const config = JSON.parse(await Deno.readTextFile(join(model, "config.json")));
  assert.equal(config.vocab_size, built.vocab);
  assert.ok(built.vocab < 1000, `vocab ${built.vocab}`);
  assert.equal(config.eos_token_id, tokenizer.eosTokenId);
  assert.equal(config.bos_token_id, tokenizer.special.endOfText);
  await assert.rejects(() => buildDemoModel(model, DEMO.model, { tasks, systemPrompt: null, tools: [] }));
});

Deno.test("tracePlans answers directly in about the planned share, with wrong numbers", () => {
  const many = generateArithmeticTasks({
    numTasks: 400,
    seed: 1,
    minOperands: 2,
    maxOperands: 2,
    maxValue: 99,
  });
  const plans = tracePlans(many, { ...DEMO.warmStart, directFraction: 0.4 });
  const direct = many.filter((t) => plans.get(t.id)!.kind === "direct");
  assert.ok(Math.abs(direct.length / many.length - 0.4) < 0.07, `${direct.length} direct`);
  for (const t of direct) {
    const plan = plans.get(t.id)!;
    assert.ok(plan.kind === "direct" && plan.answer !== t.answer && Number.isInteger(Number(plan.answer)));
  }
});

Deno.test("warm-start traces call the calculator with the task's expression and train on assistant turns only", async () => {
  const { config, hash, root, tokenizer } = await setup();
  const settings = { ...DEMO.warmStart, traces: 24, tracesPerStep: 16, directFraction: 0.5 };
  const plans = tracePlans(tasks, settings);
  const session = openSession(warmStartConfig(config, settings), hash, { showProgress: false });
  const paths = [await writeWarmStartBatch({ session, tasks, settings, dir: root })];
  await session.close();
  let rows = 0;
  for (const path of paths) {
    const batch = await readStageFile(path, "batch");
    for (let i = 0; i < batch.rows; i++, rows++) {
      const task = tasks[rows];
      const tokens = [...batch.listAt("tokens", i)];
      const mask = batch.listAt("loss_mask", i);
      assert.deepEqual([...mask], [...batch.listAt("sampled", i)]);
      const trained = tokenizer.decode(tokens.filter((_, t) => mask[t]));
      const promptLen = batch.vector("prompt_len").get(i) as number;
      const rest = tokens.filter((_, t) => t >= promptLen && !mask[t]);
      const untrained = rest.length ? tokenizer.decode(rest) : "";
      if (plans.get(task.id)!.kind === "tool") {
        assert.ok(trained.includes(`"expression": "${task.meta!.expression}"`), trained);
        assert.ok(trained.endsWith(`Final answer: ${task.answer}<|im_end|>`), trained);
        assert.ok(untrained.includes(`<tool_response>\n${task.answer}\n</tool_response>`), untrained);
        assert.ok(!trained.includes("<tool_response>"));
        assert.equal(batch.vector("correct").get(i), true);
      } else {
        assert.ok(/^Final answer: -?\d+<\|im_end\|>$/.test(trained), trained);
        assert.equal(batch.vector("correct").get(i), false);
      }
    }
  }
  assert.equal(rows, 24);
});

Deno.test("splitHeldOut holds out the last tasks and refuses a split that leaves no training task", () => {
  const { train, heldOut } = splitHeldOut(tasks, 10);
  assert.deepEqual([...train, ...heldOut], tasks);
  assert.equal(heldOut.length, 10);
  assert.throws(() => splitHeldOut(tasks, 24), /held out/);
});

/** Runs the warm start in its own session, as prepareDemo does; checks it trained through that session. */
async function warmStartIn(
  config: Config,
  hash: string,
  settings: WarmStartSettings,
  root: string,
  onEvent?: Parameters<typeof warmStart>[1],
  policy?: Policy,
) {
  const session = openSession(warmStartConfig(config, settings), hash, {
    adapter: null,
    showProgress: false,
    open: policy ? { policy } : undefined,
  });
  try {
    const result = await warmStart({ session, tasks, settings, dir: root }, onEvent);
    assert.equal(session.trainerOpen, true, "the warm start trains through the session's trainer");
    return result;
  } finally {
    await session.close();
  }
}

Deno.test("warmStart trains in one process, probes, lowers the loss, and saves an adapter with a fresh optimizer", async () => {
  const { config, hash, root, model } = await setup();
  const settings = {
    ...DEMO.warmStart,
    traces: 16,
    tracesPerStep: 4,
    copyMaxSteps: 4,
    copyAccuracy: 1, // a random model never reaches it: the copy phase runs all its steps
    probeEvery: 2,
    probeTasks: 4,
    mixSteps: 4,
    mixLr: null,
    lr: 2e-2,
    warmupSteps: 0,
  };
  const events: string[] = [];
  const result = await warmStartIn(
    config,
    hash,
    settings,
    root,
    (e) => events.push(e.kind === "step" ? `${e.phase} ${e.step}` : `${e.kind} ${e.probe.step}`),
  );
  assert.deepEqual(events, [
    "copy 1",
    "copy 2",
    "probe 2",
    "copy 3",
    "copy 4",
    "probe 4",
    "mix 5",
    "mix 6",
    "mix 7",
    "mix 8",
    "start_probe 8",
    "probe 8",
  ]);
  assert.equal(result.copySteps, 4);
  assert.equal(result.extraMixSteps, 0, "a random model calls no calculator: the mix phase does not go on");
  assert.equal(result.metrics.length, 8);
  assert.ok(result.probes.every((p) => p.accuracy >= 0 && p.accuracy <= 1 && p.toolUse <= 1));
  const first = result.metrics.slice(0, 2).reduce((a, m) => a + m.loss, 0);
  const last = result.metrics.slice(2, 4).reduce((a, m) => a + m.loss, 0);
  assert.ok(last < first, `loss ${first / 2} -> ${last / 2} on the calculator traces`);
  assert.equal(result.out, join(root, "adapter"));
  const saved = await loadCheckpoint(result.out, (await openModelDir(model)).config, "adamw");
  assert.equal(saved.optimizer.step, 0, "GRPO starts with its own optimizer state");
  assert.ok([...saved.adapter.weights.values()].some((w) => w.some((x) => x !== 0)));
});

Deno.test("the copy phase ends at the first probe that reaches copy_accuracy", async () => {
  const { config, hash, root } = await setup();
  const settings = {
    ...DEMO.warmStart,
    traces: 8,
    tracesPerStep: 4,
    copyMaxSteps: 6,
    copyAccuracy: 0, // any probe reaches it
    probeEvery: 2,
    probeTasks: 2,
    mixSteps: 1,
  };
  const result = await warmStartIn(config, hash, settings, root);
  assert.equal(result.copySteps, 2);
  assert.deepEqual(result.probes.map((p) => p.step), [2, 3]);
  assert.equal(result.metrics.length, 3);
});

Deno.test("the mix phase goes on while the policy GRPO would start from calls the calculator too often", async () => {
  const { config, hash, root, tokenizer } = await setup();
  // The probes' policy: a call that runs, then an answer, until `calling` is turned off.
  let calling = true;
  const policy = new ScriptedPolicy(
    tokenizer,
    (_prompt, turn) => calling && turn === 1 ? calculatorCallText("2+3") : finalAnswerText("5"),
  );
  const settings = {
    ...DEMO.warmStart,
    traces: 8,
    tracesPerStep: 4,
    copyMaxSteps: 2,
    copyAccuracy: 1,
    probeEvery: 2,
    probeTasks: 2,
    mixSteps: 1,
    maxStartToolUse: 0.5,
    extraMixSteps: 5,
  };
  const events: string[] = [];
  const result = await warmStartIn(config, hash, settings, root, (e) => {
    events.push(e.kind === "step" ? `${e.phase} ${e.step}` : `${e.kind} ${e.probe.step}`);
    // After the third start probe the policy answers at once: the phase stops going on.
    if (e.kind === "start_probe" && events.filter((x) => x.startsWith("start_probe")).length === 3) {
      calling = false;
    }
  }, policy);
  assert.deepEqual(events, [
    "copy 1",
    "copy 2",
    "probe 2",
    "mix 3",
    "start_probe 3",
    "extra 4",
    "extra 5",
    "start_probe 5",
    "extra 6",
    "extra 7",
    "start_probe 7",
    "extra 8",
    "start_probe 8",
    "probe 8",
  ]);
  assert.equal(result.extraMixSteps, 5);
  assert.deepEqual(result.startProbes.map((p) => p.toolUse), [1, 1, 1, 0]);

  // At the cap the phase stops whatever the probe says; with max_start_tool_use 1 nothing is probed.
  calling = true;
  const capped = await warmStartIn(config, hash, { ...settings, extraMixSteps: 2 }, root, undefined, policy);
  assert.equal(capped.extraMixSteps, 2);
  assert.deepEqual(capped.startProbes.map((p) => [p.step, p.toolUse]), [[3, 1], [5, 1]]);
  const unchecked = await warmStartIn(
    config,
    hash,
    { ...settings, maxStartToolUse: 1 },
    root,
    undefined,
    policy,
  );
  assert.equal(unchecked.extraMixSteps, 0);
  assert.deepEqual(unchecked.startProbes, []);
});

Deno.test("the warm start's learning rate: warm-up, a cosine over the copy phase, then on to a tenth", () => {
  const s = { ...DEMO.warmStart, lr: 0.01, warmupSteps: 10, copyMaxSteps: 110, mixSteps: 5 };
  assert.equal(copyLr(s, 5), 0.005);
  assert.equal(copyLr(s, 10), 0.01);
  assert.ok(Math.abs(copyLr(s, 60) - 0.0055) < 1e-12);
  assert.ok(Math.abs(copyLr(s, 110) - 0.001) < 1e-12);
  assert.ok(Math.abs(copyLr(s, 5000) - 0.001) < 1e-12);
  assert.equal(mixLr(s, 0, 0.0055), 0.0055);
  assert.ok(Math.abs(mixLr(s, 2, 0.0055) - 0.00325) < 1e-12);
  assert.ok(Math.abs(mixLr(s, 4, 0.0055) - 0.001) < 1e-12);
});
