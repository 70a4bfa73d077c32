/**
 * `rollout.environment.kind: agent` (lib/pipeline/agent_rollout.ts): the rollout stage plays each episode
 * with the user's agent module through an in-process gateway. In process, with a scripted tool-calling
 * policy: the episodes carry the rollout's ids, groups, tasks and the agent's reward, and score and mask
 * read them; the rollout's temperature is imposed. As a user runs it: `deno task loop` trains an
 * `openai`-client agent on the tiny model for two steps, the second step's agent served the first step's
 * adapter.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { SYSTEM_PROMPT } from "../../examples/agents/calculator.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import type { Task } from "../../lib/data/task.ts";
import type { ChatMessage } from "../../lib/model/chat.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { mask, openSession, rollout, score } from "../../lib/pipeline/mod.ts";
import { ROOT } from "../helpers/commands.ts";
import { calculatorAgent } from "../helpers/gateway_server.ts";
import { fileHash, loop, tinyLoopConfig } from "../helpers/loop_runs.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

/** The demo's system prompt and calculator, so that every agent's first prompt renders alike. */
const DEMO_PROMPT: Array<[string, string]> = [
  ["data.system_prompt", JSON.stringify(SYSTEM_PROMPT)],
  ["rollout.tools.enabled", "[calculator]"],
];

/** A context that holds the agent's first turns on TASK but not all three (its calls and its answer). */
const FULL_AT = 278;

const TASK: Task = { id: "t0", source: "arithmetic", prompt: "Compute 1234 * 5678.", answer: "7006652" };

async function agentSession(module: string, extra: Array<[string, string]> = []) {
  const dir = await makeTinyModel();
  const tokenizer = await loadTokenizer(dir);
  const { config } = await loadConfig({
    overrides: [
      ["model.path", dir],
      ["rollout.group_size", "2"],
      ["rollout.environment.kind", "agent"],
      ["rollout.environment.module", join(ROOT, module)],
      ["rollout.generation.max_new_tokens", "128"],
      ["rollout.generation.max_total_tokens", "1024"],
      ["rollout.generation.enable_thinking", "true"],
      ["score.rewards", "{agent: 1.0, exact_match: 1.0}"],
      ...extra,
    ],
  });
  const policy = calculatorAgent(tokenizer);
  return openSession(config, "test", { open: { policy, tokenizer }, showProgress: false });
}

Deno.test("rollout.environment agent: the agent module's episodes, with the rollout's ids and tasks, go through score and mask", async () => {
  const session = await agentSession("examples/agents/vercel_agent.ts");
  const out = await rollout(session, [TASK], { step: 3, groupIds: [5] });
  assert.deepEqual(out.episodes.map((e) => e.episodeId), ["s3/t0/0", "s3/t0/1"]);
  for (const e of out.episodes) {
    assert.equal(e.status, "ok");
    assert.equal(e.groupId, 5);
    assert.equal(e.task.answer, "7006652", "the task as the rollout read it, answer included");
    const calls = e.messages.flatMap((m: ChatMessage) => m.tool_calls ?? []);
    assert.equal(calls.length, 2, "the agent's two calculator calls, recorded");
    assert.equal(Math.max(...e.turnIdx), 3);
  }
  assert.equal(out.table.numRows, 2);
  const scored = await score(session, out.table, { step: 3 });
  assert.deepEqual(Array.from(scored.table.getChild("reward_agent")!.toArray()), [1, 1]);
  assert.deepEqual(Array.from(scored.table.getChild("reward_exact_match")!.toArray()), [1, 1]);
  const masked = await mask(session, scored.table, { step: 3 });
  assert.equal(masked.table.numRows, 2);
});

Deno.test("the openai example agent records the tools environment's tokens for the demo's system prompt and calculator", async () => {
  const agent = await agentSession("examples/agents/openai_agent.ts", DEMO_PROMPT);
  const tools = await agentSession("examples/agents/openai_agent.ts", [
    ...DEMO_PROMPT,
    ["rollout.environment.kind", "tools"],
  ]);
  const [played, sampled] = [
    (await rollout(agent, [TASK], { step: 1 })).episodes,
    (await rollout(tools, [TASK], { step: 1 })).episodes,
  ];
  assert.equal(played.length, 2);
  played.forEach((e, i) => {
    assert.equal(e.numTurns, 3);
    assert.deepEqual(e.tokens, sampled[i].tokens, `${e.episodeId}: the rollout stage's tokens`);
    assert.deepEqual(e.sampled, sampled[i].sampled);
  });
});

Deno.test("rollout.environment.command: the Python example agent records the openai agent's tokens and its reward", async () => {
  const python = join(ROOT, "examples/agents/calculator_agent.py");
  const command = await agentSession("examples/agents/openai_agent.ts", [
    ...DEMO_PROMPT,
    ["rollout.environment.module", "null"],
    ["rollout.environment.command", JSON.stringify(["python3", python])],
  ]);
  const typescript = await agentSession("examples/agents/openai_agent.ts", DEMO_PROMPT);
  const [played, module] = [
    (await rollout(command, [TASK], { step: 1 })).episodes,
    (await rollout(typescript, [TASK], { step: 1 })).episodes,
  ];
  assert.equal(played.length, 2);
  played.forEach((e, i) => {
    assert.equal(e.numTurns, 3);
    assert.deepEqual(e.tokens, module[i].tokens, `${e.episodeId}: the module agent's tokens`);
    assert.deepEqual(e.logprobs, module[i].logprobs);
  });
  const scored = await score(command, (await rollout(command, [TASK], { step: 2 })).table, { step: 2 });
  assert.deepEqual(
    Array.from(scored.table.getChild("reward_agent")!.toArray()),
    [1, 1],
    "the reward it printed",
  );
});

Deno.test("rollout.environment.command: a command that fails, or prints a reward that is no number, stops the rollout in one line naming it and the episode", async () => {
  const cases: Array<[string, RegExp]> = [
    ["echo broken >&2; exit 3", /exited with status 3: broken/],
    [`cat >/dev/null; echo '{"reward": "1"}'`, /its reward line \{"reward": "1"\} holds no finite number/],
  ];
  for (const [script, why] of cases) {
    const session = await agentSession("examples/agents/openai_agent.ts", [
      ["rollout.environment.module", "null"],
      ["rollout.environment.command", JSON.stringify(["sh", "-c", script])],
    ]);
    const error = await rollout(session, [TASK], { step: 0 }).then(() => null, (e) => e as Error);
    assert.ok(error instanceof UserError, `${script}: ${error}`);
    assert.match(
      error.message,
      /^rollout\.environment\.command sh -c .*: its agent failed in episode s0\/t0\/\d: /,
    );
    assert.match(error.message, why);
  }
});

Deno.test("rollout.environment agent: an agent that asks again once its episode fills the context leaves a truncated episode, not a failed rollout", async () => {
  // The first prompt fits; the calculator's second call does not (the agent asks regardless).
  const session = await agentSession("examples/agents/openai_agent.ts", [
    ["rollout.generation.max_total_tokens", String(FULL_AT)],
    ["rollout.generation.max_new_tokens", "64"],
  ]);
  const { episodes } = await rollout(session, [TASK], { step: 0 });
  assert.equal(episodes.length, 2);
  for (const e of episodes) {
    assert.equal(e.finishReason, "truncated", e.episodeId);
    assert.equal(e.status, "ok");
    assert.ok(e.tokens.length <= FULL_AT, `${e.tokens.length} tokens`);
    assert.ok(e.numTurns >= 1);
  }
});

Deno.test("rollout.environment agent: an agent asking another temperature stops the rollout naming it and the episode", async () => {
  const session = await agentSession("tests/fixtures/hot_agent.ts");
  await assert.rejects(
    () => rollout(session, [TASK], { step: 0 }),
    /rollout\.environment\.module .*hot_agent\.ts: its agent failed in episode s0\/t0\/0: .*temperature = 1\.5: this run samples and trains at temperature 1/,
  );
});

Deno.test("rollout.environment agent: an agent that sends no episode headers stops the rollout naming the episode", async () => {
  const session = await agentSession("tests/fixtures/headless_agent.ts");
  await assert.rejects(
    () => rollout(session, [TASK], { step: 0 }),
    /headless_agent\.ts: its agent failed in episode s0\/t0\/\d: ending episode s0\/t0\/\d: no open episode/,
  );
});

Deno.test("deno task loop trains an agent module: two steps, the second step's agent served the first step's adapter", async () => {
  const { dir, config } = await tinyLoopConfig("agent-loop-", {
    rollout: `  environment: { kind: agent, module: ${join(ROOT, "examples/agents/openai_agent.ts")} }\n`,
    rewards: "{ agent: 1.0 }",
    steps: 2,
  });
  const run = join(dir, "run");
  const done = await loop(config, run);
  assert.equal(done.code, 0, done.stderr);
  const step = (n: number, file: string) => join(run, `step-000${n}`, file);
  const versions: Set<unknown>[] = [];
  for (const n of [1, 2]) {
    const file = await readStageFile(step(n, "scored.arrow"), "scored");
    assert.equal(file.rows, 8);
    const ids = Array.from({ length: 8 }, (_, r) => String(file.column("episode_id")[r]));
    assert.ok(ids.every((id) => id.startsWith(`s${n}/`)), ids.join(" "));
    assert.ok(Array.from(file.column("reward_agent")).every((r) => r === 0 || r === 1), "the agent's reward");
    for (let row = 0; row < 8; row++) {
      // The agent sends no max_tokens: each turn is cut at rollout.generation.max_new_tokens (8).
      const turns = file.listAt<Int16Array>("turn_idx", row);
      const perTurn = new Map<number, number>();
      file.listAt<Uint8Array>("sampled", row).forEach((s, t) => {
        if (s) perTurn.set(turns[t], (perTurn.get(turns[t]) ?? 0) + 1);
      });
      assert.ok([...perTurn.values()].every((n) => n <= 8), `row ${row}: ${[...perTurn.values()]}`);
    }
    versions.push(new Set(file.column("policy_version")));
  }
  // Step 2's agent was served step 1's adapter, named as the trainer names it ...
  const trained = await readStageFile(step(1, "metrics.arrow"), "metrics");
  assert.deepEqual(versions, [new Set(["base"]), new Set([trained.metadata.adapter])]);
  // ... and the trainer found the gateway's log-probs to be its own (the served adapter is the trained one).
  for (const n of [1, 2]) {
    const diff = (await readStageFile(step(n, "metrics.arrow"), "metrics")).column("rollout_logprob_diff");
    assert.ok((diff as number[]).every((d) => d >= 0 && d < 1e-4), `step ${n} mismatch ${diff}`);
  }
  const adapter = (n: number) => fileHash(join(run, "adapters", `step-000${n}`, "adapter_model.safetensors"));
  assert.notEqual(await adapter(2), await adapter(1), "step 2 trained the adapter");
});
