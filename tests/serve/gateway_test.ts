/**
 * `deno task serve --record DIR` (lib/serve/gateway/): episodes recorded through the official `openai`
 * client have the local rollout stage's tokens and log-probs; a client that rewrites its history gets the
 * `history_mismatch` status and no misaligned tokens; the score stage reads the file.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { toolLoop } from "../../examples/agents/openai_agent.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import type { Task } from "../../lib/data/task.ts";
import type { ChatMessage } from "../../lib/model/chat.ts";
import { loadTools, toolSpecs } from "../../lib/tools/registry.ts";
import { openSession, rollout, score } from "../../lib/pipeline/mod.ts";
import { calculatorAgent, type GatewayServer, gatewayServer } from "../helpers/gateway_server.ts";
import type { Loose } from "../helpers/openai_server.ts";

const SCRIPT = ["One.", "Two."];
const TASK: Task = { id: "count", source: "generic", prompt: "Count with me.", meta: { script: SCRIPT } };

/** One turn through the client, sampled as the rollout samples (temperature, top-k/p, seed). */
async function turn(s: GatewayServer, id: string, messages: ChatMessage[], seed: number) {
  const g = s.config.rollout.generation;
  const body: Loose = {
    model: "tiny",
    messages,
    max_tokens: g.max_new_tokens,
    temperature: g.temperature,
    top_p: g.top_p,
    top_k: g.top_k,
    seed,
    chat_template_kwargs: { enable_thinking: false },
  };
  const r = await s.client.chat.completions.create(body, {
    headers: { "x-episode-id": id, "x-group-id": "g" },
  });
  return r.choices[0].message as unknown as ChatMessage;
}

Deno.test("episodes recorded through the gateway have the rollout stage's tokens and log-probs; score reads the file", async () => {
  const s = await gatewayServer();
  try {
    const session = openSession(s.config, "test", {
      open: { policy: s.policy, tokenizer: s.tokenizer },
      showProgress: false,
    });
    const local = (await rollout(session, [TASK], { step: 0 })).episodes;
    for (const e of local) {
      const messages: ChatMessage[] = [...e.promptMessages];
      for (let t = 1; t <= e.numTurns; t++) {
        messages.push(await turn(s, e.episodeId, messages, e.seed));
        if (t < e.numTurns) messages.push({ role: "user", content: SCRIPT[t - 1] });
      }
      assert.equal((await s.end(e.episodeId, 1)).status, "ok");
    }
    const path = join(s.record, "rollouts.arrow");
    const file = await readStageFile(path, "rollouts");
    assert.equal(file.rows, local.length);
    local.forEach((e, row) => {
      assert.equal(String(file.column("episode_id")[row]), e.episodeId);
      assert.deepEqual(Array.from(file.listAt<Int32Array>("tokens", row)), e.tokens, `${e.episodeId} tokens`);
      assert.deepEqual(Array.from(file.listAt<Uint8Array>("sampled", row)), e.sampled);
      assert.deepEqual(Array.from(file.listAt<Int16Array>("turn_idx", row)), e.turnIdx);
      const lps = file.listAt<Float32Array>("logprobs", row);
      e.logprobs.forEach((lp, t) => assert.ok(Math.abs(lps[t] - lp) <= 1e-3, `${e.episodeId} log-prob ${t}`));
      assert.equal(String(file.column("status")[row]), "ok");
    });
    // The score stage reads the recorded file, the agent's reported reward included.
    const c = { ...s.config, score: { ...s.config.score, rewards: { format: 1, agent: 1 } } };
    const scoring = openSession(c, "test", {
      open: { policy: s.policy, tokenizer: s.tokenizer },
      showProgress: false,
    });
    const scored = await score(scoring, file, { step: 0 });
    assert.equal(scored.table.numRows, local.length);
    assert.ok(scored.table.getChild("reward_format"));
    assert.deepEqual(Array.from(scored.table.getChild("reward_agent")!.toArray()), local.map(() => 1));
  } finally {
    await s.close();
  }
});

Deno.test("a client that rewrites its history gets history_mismatch and only the turns before the change", async () => {
  const s = await gatewayServer();
  try {
    const prompt: ChatMessage[] = [{ role: "user", content: "Count with me." }];
    const cases: Array<[string, (m: ChatMessage[]) => ChatMessage[]]> = [
      ["dropped", (m) => [m[0], m[3]]], // drops turn 1 and its answer
      ["edited", (m) => [m[0], m[1], { role: "user", content: "Three." }]], // edits the answer to turn 1
      ["kept", (m) => m],
    ];
    for (const [id, rewrite] of cases) {
      const one = await turn(s, id, prompt, 7);
      const history = [...prompt, one, { role: "user" as const, content: "One." }];
      const two = await turn(s, id, history, 7);
      const three = await turn(s, id, rewrite([...history, two, { role: "user", content: "Two." }]), 7);
      assert.equal(typeof three.content === "string" || three.content === null, true, "still answered");
      const ended = await s.end(id);
      if (id === "kept") {
        // Ended without a reward: the agent reward stops the stage naming the episode.
        const file = await readStageFile(join(s.record, "rollouts.arrow"), "rollouts");
        const c = { ...s.config, score: { ...s.config.score, rewards: { agent: 1 } } };
        const session = openSession(c, "test", {
          open: { policy: s.policy, tokenizer: s.tokenizer },
          showProgress: false,
        });
        await assert.rejects(
          () => score(session, file, { step: 0 }),
          /reward agent: episode dropped .*no reward/,
        );
      }
      assert.equal(ended.status, id === "kept" ? "ok" : "history_mismatch", id);
      assert.equal(ended.turns, id === "kept" ? 3 : 2, id);
    }
    const file = await readStageFile(join(s.record, "rollouts.arrow"), "rollouts");
    assert.deepEqual(Array.from({ length: 3 }, (_, r) => String(file.column("status")[r])), [
      "history_mismatch",
      "history_mismatch",
      "ok",
    ]);
    for (let row = 0; row < 3; row++) {
      const turns = Array.from(file.listAt<Int16Array>("turn_idx", row));
      const sampled = Array.from(file.listAt<Uint8Array>("sampled", row));
      const lastTurn = Math.max(...turns.filter((_, t) => sampled[t] === 1));
      assert.equal(lastTurn, row < 2 ? 2 : 3, `row ${row}: sampled turns recorded`);
    }
  } finally {
    await s.close();
  }
});

Deno.test("an episode named in metadata is recorded; n: 2 in a recorded episode is refused naming n", async () => {
  const s = await gatewayServer();
  try {
    const messages: ChatMessage[] = [{ role: "user", content: "Count with me." }];
    const body: Loose = {
      model: "tiny",
      messages,
      max_tokens: 4,
      metadata: { episode_id: "m", group_id: "g" },
    };
    await s.client.chat.completions.create(body);
    await assert.rejects(
      () => s.client.chat.completions.create({ ...body, n: 2 }),
      (e: Error) => /n: only one choice is recorded per turn/.test(e.message),
    );
    assert.deepEqual(await s.end("m"), {
      episode_id: "m",
      status: "ok",
      reason: null,
      turns: 1,
      path: join(s.record, "rollouts.arrow"),
    });
    const file = await readStageFile(join(s.record, "rollouts.arrow"), "rollouts");
    assert.equal(file.rows, 1);
    assert.equal(String(file.column("episode_id")[0]), "m");
  } finally {
    await s.close();
  }
});

Deno.test("a tool-calling agent through the gateway: the rollout stage's tokens, calls only in tool_calls", async () => {
  const s = await gatewayServer([
    ["rollout.group_size", "2"],
    ["rollout.generation.max_new_tokens", "128"],
    ["rollout.generation.max_total_tokens", "1024"],
    ["rollout.generation.enable_thinking", "true"],
    ["rollout.tools.enabled", "[calculator]"],
  ], (tokenizer) => Promise.resolve(calculatorAgent(tokenizer)));
  try {
    const session = openSession(s.config, "test", {
      open: { policy: s.policy, tokenizer: s.tokenizer },
      showProgress: false,
    });
    const task: Task = { id: "t0", source: "arithmetic", prompt: "Compute 1234 * 5678.", answer: "7006652" };
    const [e] = (await rollout(session, [task], { step: 0 })).episodes;
    assert.equal(e.numTurns, 3);
    const tools = toolSpecs([...(await loadTools(s.config.rollout.tools)).values()]);
    // The official client's tool loop (examples/agents/openai_agent.ts); the tool's outputs are the ones the
    // rollout's calculator gave.
    const outputs = e.toolCalls.map((c) => c.output);
    await toolLoop(
      s.client,
      { model: "tiny", tools: tools as Loose, max_tokens: 128, seed: e.seed },
      [...e.promptMessages] as Loose,
      () => Promise.resolve(outputs.shift()!),
      { "x-episode-id": e.episodeId },
    );
    assert.equal((await s.end(e.episodeId)).status, "ok");
    const file = await readStageFile(join(s.record, "rollouts.arrow"), "rollouts");
    const tokens = Array.from(file.listAt<Int32Array>("tokens", 0));
    assert.deepEqual(tokens, e.tokens);
    assert.deepEqual(Array.from(file.listAt<Uint8Array>("sampled", 0)), e.sampled);
    assert.deepEqual(Array.from(file.listAt<Float32Array>("logprobs", 0)), e.logprobs);
    const recorded = file.json("messages", 0) as ChatMessage[];
    assert.deepEqual(
      recorded.filter((m) => m.role === "assistant"),
      e.messages.filter((m) => m.role === "assistant"),
    );
    assert.equal(recorded[2].content, "");
    const rendered = s.tokenizer.renderChat(recorded, { tools, enableThinking: true });
    assert.equal(
      rendered,
      `${s.tokenizer.decode(tokens)}\n`,
      "the recorded conversation renders to its tokens",
    );
  } finally {
    await s.close();
  }
});
