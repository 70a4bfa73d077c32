/**
 * The rollout stage's episode loop (lib/rollout, stages/rollout.ts): exact tokens and provenance on the
 * real engine (tiny random Qwen3, real tokenizer); tool-call turns, `<think>` retention and the rendered
 * tool spans through a scripted test double (a random model never writes a tool call); the scripted
 * 50-step environment; an episode sleeping in a tool while the others decode.
 */

import assert from "node:assert/strict";
import { loadConfig } from "../../lib/config/mod.ts";
import type { Config } from "../../lib/config/schema.ts";
import type { Task } from "../../lib/data/task.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import type { ChatMessage, ChatTokenizer } from "../../lib/model/chat.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { type Episode, runRollout } from "../../lib/rollout/rollout.ts";
import { turnMessage } from "../../lib/rollout/assistant_message.ts";
import type { Environment } from "../../lib/rollout/environment.ts";
import { environmentFactory } from "../../lib/rollout/environments.ts";
import { Limiter } from "../../lib/rollout/limiter.ts";
import type { Tool } from "../../lib/tools/types.ts";
import { loadTools } from "../../lib/tools/registry.ts";
import { openSession, rollout } from "../../lib/pipeline/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { SCRIPTED_LOGPROB, ScriptedPolicy } from "../helpers/scripted_policy.ts";

const TASKS: Task[] = [
  {
    id: "t0",
    source: "arithmetic",
    prompt: "Compute 1234 * 5678. Use the calculator tool.",
    answer: "7006652",
  },
  { id: "t1", source: "arithmetic", prompt: "Compute 17 + 25. Use the calculator tool.", answer: "42" },
];

async function config(overrides: Array<[string, string]> = []): Promise<Config> {
  return (await loadConfig({
    overrides: [
      ["rollout.group_size", "4"],
      ["rollout.generation.max_new_tokens", "24"],
      ["rollout.generation.max_total_tokens", "512"],
      ["rollout.generation.enable_thinking", "true"],
      ["rollout.tools.enabled", "[calculator]"],
      ...overrides,
    ],
  })).config;
}

async function run(policy: Policy, tokenizer: ChatTokenizer, c: Config, tasks = TASKS): Promise<Episode[]> {
  const session = openSession(c, "test", { open: { policy, tokenizer }, showProgress: false });
  return (await rollout(session, tasks, { step: 0 })).episodes;
}

/** Splits an episode into its spans: [start, end, sampled] runs of equal provenance. */
function spans(e: Episode): Array<[number, number, number]> {
  const out: Array<[number, number, number]> = [];
  for (let t = e.promptLen; t < e.tokens.length; t++) {
    const last = out.at(-1);
    if (last && last[2] === e.sampled[t]) last[1] = t + 1;
    else out.push([t, t + 1, e.sampled[t]]);
  }
  return out;
}

/** Checks the token-in-token-out contract of every episode against the template. */
async function checkTrajectories(episodes: Episode[], tokenizer: ChatTokenizer, c: Config): Promise<void> {
  const tools = [...(await loadTools(c.rollout.tools)).values()];
  const toolSpecs = tools.map((t) => ({
    type: "function" as const,
    function: { name: t.name, description: t.description, parameters: t.parameters },
  }));
  for (const e of episodes) {
    const prompt = tokenizer.renderChatTokens(e.promptMessages, {
      tools: toolSpecs,
      enableThinking: c.rollout.generation.enable_thinking,
      addGenerationPrompt: true,
    });
    assert.deepEqual(e.tokens.slice(0, e.promptLen), prompt, `${e.episodeId}: prompt tokens`);
    assert.ok(e.sampled.slice(0, e.promptLen).every((s) => s === 0));
    const assistants = e.messages.filter((m) => m.role === "assistant");
    const envMessages = groupEnvironmentMessages(e.messages.slice(e.promptMessages.length));
    const runs = spans(e);
    let [a, env, closed] = [0, 0, true];
    for (const [from, to, sampled] of runs) {
      const ids = e.tokens.slice(from, to);
      if (sampled) {
        closed = ids.at(-1) === tokenizer.eosTokenId;
        const body = closed ? ids.slice(0, -1) : ids;
        const m = assistants[a++];
        assert.deepEqual(
          turnMessage(tokenizer.decode(body), m.tool_calls),
          m,
          `${e.episodeId}: turn ${a} message`,
        );
      } else { // a turn cut at max_new_tokens is closed by the environment's end-of-turn token
        const expected = renderEnv(tokenizer, envMessages[env++], c, !closed);
        assert.deepEqual(ids, expected, `${e.episodeId}: env span ${env}`);
      }
    }
    assert.equal(a, e.numTurns);
  }
}

/** The environment's messages after each assistant message, grouped per turn. */
function groupEnvironmentMessages(messages: ChatMessage[]): ChatMessage[][] {
  const groups: ChatMessage[][] = [];
  for (const m of messages) {
    if (m.role === "assistant") groups.push([]);
    else groups.at(-1)!.push(m);
  }
  return groups.filter((g) => g.length > 0);
}

function renderEnv(tokenizer: ChatTokenizer, messages: ChatMessage[], c: Config, close: boolean): number[] {
  const pieces = { includeTurnEnd: close, enableThinking: c.rollout.generation.enable_thinking };
  if (messages[0].role === "tool") return tokenizer.toolResultTokens(messages.map((m) => m.content), pieces);
  return tokenizer.userTurnTokens(messages[0].content, pieces);
}

Deno.test("rollout on a tiny model: prompt = template rendering, sampled = generated, log-probs = policy.logprobs", async () => {
  const dir = await makeTinyModel();
  const [policy, tokenizer, c] = [
    await LocalPolicy.load(dir, { maxSequences: 8 }),
    await loadTokenizer(dir),
    await config(),
  ];
  try {
    const episodes = await run(policy, tokenizer, c);
    assert.equal(episodes.length, 8);
    assert.deepEqual(
      episodes.map((e) => [e.taskId, e.sampleIdx]),
      [0, 1, 2, 3, 0, 1, 2, 3].map((s, i) => [`t${i >> 2}`, s]),
    );
    await checkTrajectories(episodes, tokenizer, c);
    const lps = await policy.logprobs(episodes.map((e) => e.tokens), { temperature: 1 });
    episodes.forEach((e, i) => {
      let generated = 0;
      e.tokens.forEach((_, t) => {
        if (!e.sampled[t]) return assert.equal(e.logprobs[t], 0);
        generated += 1;
        assert.ok(Math.abs(e.logprobs[t] - lps[i][t]) < 1e-4, `${e.episodeId} token ${t}`);
      });
      assert.ok(generated > 0);
    });
    // The same seeds give the same episodes.
    const again = await run(policy, tokenizer, c);
    assert.deepEqual(again.map((e) => e.tokens), episodes.map((e) => e.tokens));
  } finally {
    await policy.close();
  }
});

const THINK = "<think>\nI should use the calculator.\n</think>\n\n";
const CALL = (expr: string) =>
  `<tool_call>\n{"name": "calculator", "arguments": {"expression": "${expr}"}}\n</tool_call>`;

Deno.test("two tool calls and a final answer: earlier <think> kept, tool spans = template, messages = conversation", async () => {
  const dir = await makeTinyModel();
  const [tokenizer, c] = [
    await loadTokenizer(dir),
    await config([["rollout.generation.max_new_tokens", "128"]]),
  ];
  const script = ["1234 * 5678", "7006652 + 0"];
  const policy = new ScriptedPolicy(
    tokenizer,
    (_, turn) => turn <= 2 ? `${THINK}${CALL(script[turn - 1])}` : `${THINK}Final answer: 7006652`,
  );
  const [e] = await run(policy, tokenizer, { ...c, rollout: { ...c.rollout, group_size: 1 } }, [TASKS[0]]);
  assert.equal(e.numTurns, 3);
  assert.equal(e.finishReason, "stop");
  assert.equal(e.status, "ok");
  assert.deepEqual(e.toolCalls.map((t) => [t.turn, t.name, t.status, t.output]), [
    [1, "calculator", "ok", "7006652"],
    [2, "calculator", "ok", "7006652"],
  ]);
  // Every turn's <think> block is still in the tokens (the template would drop the earlier ones).
  const think = tokenizer.special.think;
  assert.equal(e.tokens.filter((t, i) => t === think && e.sampled[i]).length, 3);
  assert.ok(e.sampled.every((s, t) => !s || e.logprobs[t] === SCRIPTED_LOGPROB));
  await checkTrajectories([e], tokenizer, c);
  assert.deepEqual(e.messages.map((m) => m.role), [
    "system",
    "user",
    "assistant",
    "tool",
    "assistant",
    "tool",
    "assistant",
  ]);
  assert.equal(e.messages[2].tool_calls?.[0].function.name, "calculator");
  assert.equal(e.messages[2].content, "", "the call is in tool_calls, not in content");
  assert.equal(e.messages[2].reasoning_content, "\nI should use the calculator.\n");
  assert.equal(policy.closed.length, 1);
  assert.deepEqual(policy.closed[0], e.tokens);
});

Deno.test("a prompt longer than max_total_tokens stops the rollout before sampling, in one line with the numbers", async () => {
  const dir = await makeTinyModel();
  const tokenizer = await loadTokenizer(dir);
  const c = await config([["rollout.generation.max_new_tokens", "16"], [
    "rollout.generation.max_total_tokens",
    "64",
  ]]);
  const policy = new ScriptedPolicy(tokenizer, () => "Final answer: 1"); // TEST DOUBLE
  const long = { ...TASKS[0], prompt: "Add these numbers. ".repeat(40) };
  await assert.rejects(() => run(policy, tokenizer, c, [long]), (e) => {
    assert.ok(e instanceof UserError, String(e));
    assert.match(
      e.message,
      /^rollout\.generation\.max_total_tokens \(got 64\): a task's prompt \(with \d+ tool specs\) is (\d+) tokens, so no token could be sampled.*at least \d+/,
    );
    return true;
  });
  assert.equal(policy.closed.length, 0, "no sequence was opened");
});

Deno.test("the scripted environment: 50 steps, or early termination on the task's stop phrase", async () => {
  const dir = await makeTinyModel();
  const [policy, tokenizer] = [await LocalPolicy.load(dir, { maxSequences: 8 }), await loadTokenizer(dir)];
  const c = await config([
    ["rollout.environment.kind", "scripted"],
    ["rollout.environment.max_turns", "50"],
    ["rollout.environment.continue_prompt", "Step {step}: go on."],
    ["rollout.generation.max_new_tokens", "4"],
    ["rollout.generation.max_total_tokens", "2048"],
    ["rollout.generation.enable_thinking", "false"],
    ["rollout.group_size", "3"],
  ]);
  const tasks: Task[] = [
    { id: "long", source: "generic", prompt: "Count with me.", meta: { script: ["One.", "Two."] } },
    { id: "early", source: "generic", prompt: "Say anything.", meta: { stop_phrase: "e" } },
  ];
  try {
    const episodes = await run(policy, tokenizer, c, tasks);
    const long = episodes.filter((e) => e.taskId === "long");
    const early = episodes.filter((e) => e.taskId === "early");
    for (const e of long) {
      assert.equal(e.numTurns, 50, e.episodeId);
      assert.equal(e.finishReason, "max_turns");
      assert.deepEqual(e.messages.filter((m) => m.role === "user").slice(1, 4).map((m) => m.content), [
        "One.",
        "Two.",
        "Step 4: go on.",
      ]);
    }
    for (const e of early) {
      assert.equal(e.finishReason, "env_done", e.episodeId);
      assert.ok(e.numTurns < 50);
      const last = e.messages.filter((m) => m.role === "assistant").at(-1)!;
      assert.ok(last.content.toLowerCase().includes("e"));
    }
    await checkTrajectories(episodes, tokenizer, c);
  } finally {
    await policy.close();
  }
});

Deno.test("a tool sleeping 2 s in one episode of 16 does not stop the other 15 from decoding", async () => {
  const dir = await makeTinyModel();
  const [policy, tokenizer] = [await LocalPolicy.load(dir, { maxSequences: 16 }), await loadTokenizer(dir)];
  // Every episode runs 6 turns of up to 16 tokens ("Continue." after each); the sleeper naps after turn 1.
  const c = await config([
    ["rollout.generation.max_new_tokens", "16"],
    ["rollout.generation.enable_thinking", "false"],
    ["rollout.environment.kind", "scripted"],
    ["rollout.environment.max_turns", "6"],
  ]);
  const finished: Record<string, number> = {};
  let napStats: [number, number] = [0, 0];
  const nap: Tool = {
    name: "nap",
    description: "sleeps two seconds",
    parameters: { type: "object", properties: {} },
    run: async () => {
      const before = (await policy.sequenceStats()).decodeSteps;
      await new Promise((r) => setTimeout(r, 2000));
      napStats = [before, (await policy.sequenceStats()).decodeSteps];
      return "rested";
    },
  };
  const tools = new Map([...(await loadTools(c.rollout.tools)), ["nap", nap]]);
  const base = await environmentFactory(c, tools, new Limiter(4));
  // TEST DOUBLE environment: the sleeper's first turn is read as a call to `nap` (a random model never
  // writes one); everything else is the real tool environment on the real engine.
  const makeEnv = (task: Task): Environment => {
    const env = base(task);
    return {
      reset: () => env.reset(),
      step: (turn) =>
        env.step(
          task.id === "sleeper" && turn.turn === 1 ? { ...turn, finishReason: "stop", text: NAP_CALL } : turn,
        ),
    };
  };
  const tasks: Task[] = Array.from({ length: 16 }, (_, i) => ({
    id: i === 0 ? "sleeper" : `t${i}`,
    source: "generic",
    prompt: `Question ${i}?`,
  }));
  try {
    const started = performance.now();
    const episodes = await runRollout(policy, tokenizer, tasks, makeEnv, {
      ...episodeOptions(c),
      groupSize: 1,
      seed: 0,
      step: 0,
      onEpisode: (e) => (finished[e.taskId] = performance.now() - started),
    });
    const sleeper = episodes.find((e) => e.taskId === "sleeper")!;
    assert.equal(sleeper.toolCalls[0]?.name, "nap");
    assert.ok(sleeper.numTurns >= 2, "the sleeper went on after its tool");
    const others = Object.entries(finished).filter(([id]) => id !== "sleeper").map(([, ms]) => ms);
    assert.equal(others.length, 15);
    // The engine kept stepping while the sleeper slept (its counters moved during the nap), and the 15
    // finished before it. (Wall times are not compared to a fixed bound: CI machines vary in speed.)
    assert.ok(napStats[1] - napStats[0] >= 20, `decode steps during the nap: ${napStats}`);
    assert.ok(Math.max(...others) < finished.sleeper, `others by ${Math.max(...others)} ms`);
  } finally {
    await policy.close();
  }
});

const NAP_CALL = '<tool_call>\n{"name": "nap", "arguments": {}}\n</tool_call>';

function episodeOptions(c: Config) {
  const g = c.rollout.generation;
  return {
    maxNewTokens: g.max_new_tokens,
    maxTotalTokens: g.max_total_tokens,
    maxTurns: c.rollout.environment.max_turns,
    temperature: g.temperature,
    topK: g.top_k,
    topP: g.top_p,
    enableThinking: g.enable_thinking,
    toolSpecs: [],
  };
}
