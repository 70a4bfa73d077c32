/**
 * The demo with `rollout.environment.kind: agent` (issue 31): its warm start is the demo's teacher writing
 * calculator traces, so its traces and probe play the `tools` environment whatever GRPO's is. The
 * teacher is a `Policy` as any other: played through the gateway by the `openai` example agent, it writes
 * the same tokens as through the tools environment (it reports its tokens as it writes them, and counts
 * its turns from the conversation, since a gateway opens a sequence per request). A copy phase with no
 * trace to train on, and a train call given a row that is not one, are refused naming what is wrong. As a
 * user runs it: the demo with the `openai` agent, under `deno task demo`'s permissions (the gateway on
 * loopback), warm-starts and trains one step on a tiny model.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import type { StageFile } from "../../lib/arrow/stage_file.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { loadTasks } from "../../lib/data/mod.ts";
import { buildDemoModel } from "../../lib/demo/model.ts";
import { demoSettings } from "../../lib/demo/settings.ts";
import { TeacherPolicy } from "../../lib/demo/teacher.ts";
import { calculatorCalls } from "../../lib/demo/traces.ts";
import { requireCopyPool, warmStartConfig } from "../../lib/demo/warm_start.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { openSession, rollout } from "../../lib/pipeline/mod.ts";
import { checkedRows } from "../../lib/pipeline/train.ts";
import { RunLayout } from "../../lib/run/layout.ts";
import { loadTools, toolSpecs } from "../../lib/tools/registry.ts";
import { ROOT, stage } from "../helpers/commands.ts";

const DEMO = join(ROOT, "configs/demo.yaml");
const AGENT: Array<[string, string]> = [
  ["rollout.environment.kind", "agent"],
  ["rollout.environment.module", join(ROOT, "examples/agents/openai_agent.ts")],
];

/** The demo config with `more`, 24 tasks and a tiny demo model built for them. */
async function demoSetup(more: Array<[string, string]> = []) {
  const { config, hash } = await loadConfig({
    file: DEMO,
    overrides: [["data.arithmetic.num_tasks", "24"], ["eval.num_tasks", "4"], ...more],
  });
  const tasks = (await loadTasks(config.data)).slice(0, 4);
  const tools = await loadTools(config.rollout.tools);
  const root = await Deno.makeTempDir({ prefix: "demo-agent-" });
  const model = await buildDemoModel(
    join(root, "model"),
    { ...demoSettings(config).model, layers: 1, hidden: 32, headDim: 16 },
    { tasks, systemPrompt: config.data.system_prompt, tools: toolSpecs([...tools.values()]) },
  );
  config.model.path = model.dir;
  return { config, hash, tasks, tools, tokenizer: await loadTokenizer(model.dir) };
}

Deno.test("the warm start of an agent run plays the tools environment (the teacher is not the user's agent)", async () => {
  const { config } = await loadConfig({ file: DEMO, overrides: AGENT });
  const warm = warmStartConfig(config, demoSettings(config).warmStart);
  assert.equal(warm.rollout.environment.kind, "tools");
  assert.equal(warm.rollout.environment.module, null);
  assert.equal(config.rollout.environment.kind, "agent", "GRPO's environment is left as configured");
});

Deno.test("the teacher through the gateway and the openai agent writes the tools environment's tokens", async () => {
  const { config, hash, tasks, tools, tokenizer } = await demoSetup(AGENT);
  const plan = (task: (typeof tasks)[number]) => ({
    kind: "tool" as const,
    calls: calculatorCalls(task, null),
  });
  const played = async (kind: "agent" | "tools") => {
    const environment = { ...config.rollout.environment, kind };
    const settings = { ...config.rollout, group_size: 1, environment };
    const session = openSession({ ...config, rollout: settings }, hash, {
      showProgress: false,
      open: { tokenizer, tools },
    });
    const policy = new TeacherPolicy(tokenizer, tasks, plan);
    return (await rollout(session, tasks, { step: 0, policy, settings })).episodes;
  };
  const [agent, local] = [await played("agent"), await played("tools")];
  for (const [i, episode] of agent.entries()) {
    assert.equal(episode.numTurns, 2, "the call, then the answer");
    assert.deepEqual(episode.tokens, local[i].tokens);
    assert.deepEqual(episode.sampled, local[i].sampled);
    assert.equal(episode.sampled.length, episode.tokens.length);
  }
});

Deno.test("a copy phase without a calculator trace to train on is refused in one line", async () => {
  const { config } = await loadConfig({ file: DEMO });
  const settings = { ...demoSettings(config).warmStart, copyMaxSteps: 10 };
  assert.throws(
    () => requireCopyPool({ tool: [], all: [0, 1, 2] }, "traces/batch.arrow", settings),
    /traces\/batch\.arrow: none of its 3 traces is a calculator trace.*demo\.warm_start\.traces/,
  );
  const pools = { tool: [1], all: [0, 1] };
  assert.equal(requireCopyPool(pools, "traces/batch.arrow", settings), pools);
});

Deno.test("train refuses a row that is not one of the batch's, undefined included, naming it", () => {
  const file = { rows: 3, path: "batch.arrow" } as StageFile;
  assert.throws(() => checkedRows(file, [0, undefined as unknown as number]), /row undefined \(rows\[1\]\)/);
  assert.throws(() => checkedRows(file, [3]), /row 3 \(rows\[0\]\) of batch\.arrow.*rows 0 to 2/);
  assert.deepEqual(checkedRows(file, [2, 0]), [2, 0]);
});

/** The demo at its smallest: a one-layer model, 16 traces, a few copy steps, one GRPO step. */
const TINY_DEMO = [
  "--loop.steps=1",
  "--loop.eval_every=1",
  "--eval.num_tasks=4",
  "--data.arithmetic.num_tasks=40",
  "--rollout.tasks_per_step=2",
  "--rollout.group_size=2",
  "--demo.model.layers=1",
  "--demo.model.hidden=32",
  "--demo.model.heads=2",
  "--demo.model.kv_heads=1",
  "--demo.model.head_dim=16",
  "--demo.model.intermediate=32",
  "--demo.warm_start.traces=16",
  "--demo.warm_start.copy_max_steps=4",
  "--demo.warm_start.probe_every=4",
  "--demo.warm_start.probe_tasks=2",
  "--demo.warm_start.mix_steps=1",
  "--demo.warm_start.warmup_steps=0",
];

Deno.test("deno task demo with the openai agent warm-starts and trains (the gateway on loopback)", async () => {
  const root = await Deno.makeTempDir({ prefix: "demo-agent-cli-" });
  const r = await stage("demo", [
    `--model.path=${join(root, "model")}`,
    `--loop.run_dir=${join(root, "run")}`,
    ...TINY_DEMO,
    "--rollout.environment.kind=agent",
    "--rollout.environment.module=examples/agents/openai_agent.ts",
  ], { timeoutMs: 600_000 });
  assert.equal(r.code, 0, r.stderr);
  const rollouts = new RunLayout(join(root, "run")).stepFile(1, "rollouts");
  const meta = (await readStageFile(rollouts, "rollouts")).metadata.sampling as { environment?: string };
  assert.equal(meta.environment, "agent", "GRPO played the agent");
  await Deno.remove(root, { recursive: true });
});
