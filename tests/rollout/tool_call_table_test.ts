/**
 * One table of model outputs, read by both places that parse Hermes tool calls (docs/tool_calls.md,
 * "Two views"): `POST /v1/chat/completions` of `deno task serve` (over HTTP, a scripted policy writing
 * each text) and the rollout's `parseToolCalls`. Each row states both documented results: the chat
 * reply as vLLM's qwen3 reasoning parser and Hermes tool parser build it, and the rollout's per-block
 * statuses.
 */

import assert from "node:assert/strict";
import { parseToolCalls } from "../../lib/rollout/tool_calls.ts";
import { startServer } from "../../lib/serve/serve.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { ScriptedPolicy } from "../helpers/scripted_policy.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const call = (expression: string) =>
  `<tool_call>\n{"name": "calculator", "arguments": {"expression": "${expression}"}}\n</tool_call>`;
const T = call("2+3");
const BAD = "<tool_call>\n{oops}\n</tool_call>";

interface Row {
  what: string;
  text: string;
  /** Request: tools present (default true), tool_choice, enable_thinking (default: template's, on). */
  tools?: boolean;
  toolChoice?: string;
  thinking?: boolean;
  chat: {
    reasoning: string | null;
    content: string | null;
    /** [name, arguments parsed] per call. */
    calls?: [string, unknown][];
  };
  /** Per block: ["ok", name] or ["invalid", fragment of the error]. */
  rollout: [string, string][];
  /** The streamed reasoning, where it differs from the unstreamed (as in vLLM). */
  streamedReasoning?: string;
}

const ROWS: Row[] = [
  {
    what: "an answer after reasoning",
    text: "<think>\nr\n</think>\n\nThe answer is 5.",
    chat: { reasoning: "\nr\n", content: "\n\nThe answer is 5." },
    rollout: [],
  },
  {
    what: "one call after reasoning",
    text: `<think>\nadd\n</think>\n\n${T}`,
    chat: { reasoning: "\nadd\n", content: "\n\n", calls: [["calculator", { expression: "2+3" }]] },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "one call, thinking off",
    text: T,
    thinking: false,
    chat: { reasoning: null, content: null, calls: [["calculator", { expression: "2+3" }]] },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "text before a call",
    text: `Let me compute.\n${T}`,
    thinking: false,
    chat: { reasoning: null, content: "Let me compute.\n", calls: [["calculator", { expression: "2+3" }]] },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "text after a call (dropped from the content, as vLLM)",
    text: `${T}\nDone.`,
    thinking: false,
    chat: { reasoning: null, content: null, calls: [["calculator", { expression: "2+3" }]] },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "two calls in order",
    text: `${call("1")}\n${call("2")}`,
    thinking: false,
    chat: {
      reasoning: null,
      content: null,
      calls: [["calculator", { expression: "1" }], ["calculator", { expression: "2" }]],
    },
    rollout: [["ok", "calculator"], ["ok", "calculator"]],
  },
  {
    what: "an unclosed <tool_call> whose JSON is complete",
    text: '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}}',
    thinking: false,
    chat: { reasoning: null, content: null, calls: [["calculator", { expression: "1" }]] },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "an unclosed <tool_call> with truncated JSON",
    text: 'Sure. <tool_call>\n{"name": "calculator", "arguments": {"expr',
    thinking: false,
    chat: { reasoning: null, content: 'Sure. <tool_call>\n{"name": "calculator", "arguments": {"expr' },
    rollout: [["invalid", "not complete"]],
  },
  {
    what: "invalid JSON",
    text: BAD,
    thinking: false,
    chat: { reasoning: null, content: BAD },
    rollout: [["invalid", "not valid"]],
  },
  {
    what: "an invalid block among valid ones",
    text: `${T}\n${BAD}`,
    thinking: false,
    chat: { reasoning: null, content: `${T}\n${BAD}` },
    rollout: [["ok", "calculator"], ["invalid", "not valid"]],
  },
  {
    what: "a call without arguments",
    text: '<tool_call>\n{"name": "now"}\n</tool_call>',
    thinking: false,
    chat: { reasoning: null, content: '<tool_call>\n{"name": "now"}\n</tool_call>' },
    rollout: [["invalid", '"arguments" is missing']],
  },
  {
    what: "a call without a name",
    text: '<tool_call>\n{"arguments": {}}\n</tool_call>',
    thinking: false,
    chat: { reasoning: null, content: '<tool_call>\n{"arguments": {}}\n</tool_call>' },
    rollout: [["invalid", '"name" must be']],
  },
  {
    what: "arguments as a JSON string (decoded; vLLM returns it encoded once more)",
    text: '<tool_call>\n{"name": "calculator", "arguments": "{\\"expression\\": \\"1+1\\"}"}\n</tool_call>',
    thinking: false,
    chat: { reasoning: null, content: null, calls: [["calculator", { expression: "1+1" }]] },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "</tool_call> inside a string argument (vLLM's regex would cut there)",
    text: '<tool_call>\n{"name": "echo", "arguments": {"s": "a</tool_call>b"}}\n</tool_call>',
    thinking: false,
    chat: { reasoning: null, content: null, calls: [["echo", { s: "a</tool_call>b" }]] },
    rollout: [["ok", "echo"]],
  },
  {
    what: "a duplicate key (Python's json keeps the last; we refuse)",
    text: '<tool_call>\n{"name": "a", "name": "b", "arguments": {}}\n</tool_call>',
    thinking: false,
    chat: {
      reasoning: null,
      content: '<tool_call>\n{"name": "a", "name": "b", "arguments": {}}\n</tool_call>',
    },
    rollout: [["invalid", 'duplicate key "name"']],
  },
  {
    what: "an unclosed <think>: the text is reasoning",
    text: "<think>\nstill thinking",
    chat: { reasoning: "\nstill thinking", content: null },
    rollout: [],
  },
  {
    what: "a call inside an unclosed <think>",
    text: `<think>\nmaybe ${T}`,
    chat: { reasoning: `\nmaybe ${T}`, content: null },
    rollout: [],
  },
  {
    what: "a call inside a closed <think>, then an answer",
    text: `<think>\n${T}\n</think>\n\nNo tool needed.`,
    chat: { reasoning: `\n${T}\n`, content: "\n\nNo tool needed." },
    rollout: [],
  },
  {
    what: "thinking on but no <think> written (all reasoning in vLLM; the rollout runs the call)",
    text: T,
    chat: { reasoning: T, content: null },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "tool_choice none: no parsing",
    text: T,
    thinking: false,
    toolChoice: "none",
    chat: { reasoning: null, content: T },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "no tools in the request: no parsing",
    text: T,
    thinking: false,
    tools: false,
    chat: { reasoning: null, content: T },
    rollout: [["ok", "calculator"]],
  },
  {
    what: "text before <think> (dropped, as vLLM)",
    text: "Hmm <think>\nr\n</think>\n\nAnswer",
    chat: { reasoning: "\nr\n", content: "\n\nAnswer" },
    rollout: [],
    streamedReasoning: "Hmm \nr\n", // sent before <think> arrived, as vLLM's stream sends it
  },
];

const TOOLS = [{
  type: "function",
  function: {
    name: "calculator",
    parameters: { type: "object", properties: { expression: { type: "string" } } },
  },
}];

Deno.test("tool-call table: the chat route and the rollout parser give each row's documented result", async () => {
  assert.ok(ROWS.length >= 20);
  const modelDir = await makeTinyModel();
  const tokenizer = await loadTokenizer(modelDir);
  let current = "";
  const policy = new ScriptedPolicy(tokenizer, () => current);
  Object.assign(policy.config, { vocab_size: 151936 });
  const root = await Deno.makeTempDir({ prefix: "tool-table-" });
  const server = await startServer(policy, { modelDir, port: 0, adapterRoot: root, maxModelLen: 4096 });
  try {
    for (const row of ROWS) {
      const rollout = parseToolCalls(row.text).map((c) =>
        c.ok ? ["ok", c.name] : ["invalid", expectedFragment(row, c.error)]
      );
      assert.deepEqual(rollout, row.rollout, `rollout: ${row.what}`);
      current = row.text;
      const body: Record<string, unknown> = { messages: [{ role: "user", content: "Q" }], max_tokens: 2000 };
      if (row.tools !== false) body.tools = TOOLS;
      if (row.toolChoice) body.tool_choice = row.toolChoice;
      if (row.thinking === false) body.chat_template_kwargs = { enable_thinking: false };
      const response = await fetch(`${server.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const answer = await response.json();
      assert.equal(response.status, 200, `${row.what}: ${JSON.stringify(answer)}`);
      const [choice] = answer.choices;
      const calls = (choice.message.tool_calls ?? []).map((
        c: { type: string; function: { name: string; arguments: string } },
      ) => [c.function.name, JSON.parse(c.function.arguments)]);
      assert.deepEqual(
        { reasoning: choice.message.reasoning, content: choice.message.content, calls },
        { reasoning: row.chat.reasoning, content: row.chat.content, calls: row.chat.calls ?? [] },
        `chat: ${row.what}`,
      );
      assert.equal(choice.finish_reason, calls.length > 0 ? "tool_calls" : "stop", `finish: ${row.what}`);
      const streamed = await streamedMessage(server.url, body);
      assert.deepEqual(streamed, {
        reasoning: row.streamedReasoning ?? choice.message.reasoning ?? "",
        content: choice.message.content ?? "",
        calls: choice.message.tool_calls.map((c: { function: unknown }) => c.function),
        finish: choice.finish_reason,
      }, `streamed: ${row.what}`);
    }
  } finally {
    await server.close();
    await Deno.remove(root, { recursive: true });
  }
});

/** The row's expected fragment when the error contains it, else the error itself (so a mismatch shows it). */
function expectedFragment(row: Row, error: string): string {
  const fragment = row.rollout.find(([kind, f]) => kind === "invalid" && error.includes(f));
  return fragment ? fragment[1] : error;
}

/** The streamed reply's deltas put together. */
async function streamedMessage(url: string, body: Record<string, unknown>) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    body: JSON.stringify({ ...body, stream: true }),
  });
  const out = { reasoning: "", content: "", calls: [] as unknown[], finish: null as string | null };
  for (const line of (await response.text()).split("\n\n")) {
    if (!line.startsWith("data: {")) continue;
    const choice = JSON.parse(line.slice(6)).choices[0];
    out.reasoning += choice.delta.reasoning ?? "";
    out.content += choice.delta.content ?? "";
    out.calls.push(...(choice.delta.tool_calls ?? []).map((c: { function: unknown }) => c.function));
    out.finish = choice.finish_reason ?? out.finish;
  }
  return out;
}

Deno.test("tool_choice required and named force the start of a call; a forced reply without one is a 400", async () => {
  const modelDir = await makeTinyModel();
  const tokenizer = await loadTokenizer(modelDir);
  let reply = "";
  let prompt = "";
  const policy = new ScriptedPolicy(tokenizer, (p) => {
    prompt = tokenizer.decode([...p]);
    return reply;
  });
  Object.assign(policy.config, { vocab_size: 151936 });
  const root = await Deno.makeTempDir({ prefix: "tool-choice-" });
  const server = await startServer(policy, { modelDir, port: 0, adapterRoot: root, maxModelLen: 4096 });
  const ask = async (extra: Record<string, unknown>) => {
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "Q" }], tools: TOOLS, ...extra }),
    });
    return { status: response.status, json: await response.json() };
  };
  try {
    reply = '{"expression": "1"}}\n</tool_call>';
    const named = await ask({ tool_choice: { type: "function", function: { name: "calculator" } } });
    assert.ok(
      prompt.endsWith('<think>\n\n</think>\n\n<tool_call>\n{"name": "calculator", "arguments": '),
      prompt,
    );
    const [forced] = named.json.choices[0].message.tool_calls;
    assert.deepEqual([forced.function.name, JSON.parse(forced.function.arguments)], ["calculator", {
      expression: "1",
    }]);
    assert.equal(named.json.choices[0].finish_reason, "stop", "a named call finishes with stop, as OpenAI's");
    reply = 'calculator", "arguments": {"expression": "2"}}\n</tool_call>';
    const required = await ask({ tool_choice: "required", chat_template_kwargs: { enable_thinking: false } });
    assert.ok(prompt.endsWith('</think>\n\n<tool_call>\n{"name": "'), prompt);
    assert.equal(required.json.choices[0].message.tool_calls[0].function.name, "calculator");
    assert.equal(required.json.choices[0].finish_reason, "tool_calls");
    reply = "oops";
    const failed = await ask({ tool_choice: "required" });
    assert.equal(failed.status, 400);
    assert.equal(failed.json.error.param, "tool_choice");
    reply = `${call("1")}\n${call("2")}`;
    const thinkingOff = { chat_template_kwargs: { enable_thinking: false } };
    assert.equal((await ask(thinkingOff)).json.choices[0].message.tool_calls.length, 2);
    const one = await ask({ ...thinkingOff, parallel_tool_calls: false });
    assert.equal(
      one.json.choices[0].message.tool_calls.length,
      1,
      "parallel_tool_calls false: the first call",
    );
    const unknown = await ask({ tool_choice: { type: "function", function: { name: "nope" } } });
    assert.equal(unknown.status, 400);
  } finally {
    await server.close();
    await Deno.remove(root, { recursive: true });
  }
});
