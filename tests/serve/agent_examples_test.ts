/**
 * The example agents of examples/agents/ (the Vercel AI SDK's `generateText` with a tool, and the official
 * `openai` client's tool loop) played through the gateway (lib/serve/gateway/agent.ts) on the tiny model
 * with a scripted tool-calling policy: their episodes land in `rollouts.arrow` with every turn and call,
 * and `deno task score` reads the file, the agent's reward included.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { run as openaiAgent } from "../../examples/agents/openai_agent.ts";
import { run as vercelAgent } from "../../examples/agents/vercel_agent.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import type { Task } from "../../lib/data/task.ts";
import type { ChatMessage } from "../../lib/model/chat.ts";
import { agentClient, type AgentRun, playEpisode } from "../../lib/serve/gateway/agent.ts";
import { command } from "../helpers/commands.ts";
import { calculatorAgent, gatewayServer } from "../helpers/gateway_server.ts";

const TASK: Task = { id: "t0", source: "arithmetic", prompt: "Compute 1234 * 5678.", answer: "7006652" };

/** Plays two episodes of TASK with `run` through a fresh gateway; returns the recorded file's path. */
async function record(run: AgentRun): Promise<string> {
  const s = await gatewayServer([], (tokenizer) => Promise.resolve(calculatorAgent(tokenizer)));
  try {
    const at = { baseURL: `${s.url}/v1`, apiKey: "unused", model: "tiny" };
    for (const [i, id] of ["t0/0", "t0/1"].entries()) {
      const ended = await playEpisode(run, TASK, agentClient(at, id, "t0", 100 + i));
      assert.deepEqual([ended.status, ended.turns], ["ok", 3], `${id}: two calls and the answer, recorded`);
    }
    return join(s.record, "rollouts.arrow");
  } finally {
    await s.close();
  }
}

/** `deno task score` on the file with the agent's reward and the format reward; the scored file. */
async function scoreFile(path: string) {
  const out = join(await Deno.makeTempDir({ prefix: "agent-score-" }), "scored.arrow");
  const r = await command("stages/score.ts", [
    "--in",
    path,
    "--out",
    out,
    "--score.rewards={agent: 1.0, format: 0.0}",
  ]);
  assert.equal(r.code, 0, r.stderr);
  return await readStageFile(out, "scored");
}

for (const [name, run] of [["Vercel AI SDK", vercelAgent], ["openai client", openaiAgent]] as const) {
  Deno.test(`the ${name} example agent's episodes land in rollouts.arrow and deno task score reads them`, async () => {
    const path = await record(run);
    const file = await readStageFile(path, "rollouts");
    assert.equal(file.rows, 2);
    for (let row = 0; row < 2; row++) {
      assert.equal(String(file.column("status")[row]), "ok");
      assert.equal(String(file.column("group_id")[row]), "0", "one group: the two episodes GRPO compares");
      const messages = file.json("messages", row) as ChatMessage[];
      const calls = messages.flatMap((m) => m.tool_calls ?? []);
      assert.deepEqual(calls.map((c) => c.function.arguments), [
        { expression: "1234 * 5678" },
        { expression: "7006652 + 0" },
      ]);
      const answers = messages.filter((m) => m.role === "tool").map((m) => m.content);
      assert.deepEqual(answers, ["7006652", "7006652"], "the agent's own calculator answered");
    }
    const scored = await scoreFile(path);
    assert.equal(scored.rows, 2);
    assert.deepEqual(Array.from(scored.column("reward_agent")), [1, 1], "the reward the agent judged");
  });
}
