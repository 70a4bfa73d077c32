/**
 * `deno task serve` through the official `openai` npm client, on the tiny model: streamed and unstreamed
 * answers agree token for token; `n` returns that many choices; stop strings stop; `echo` scores the
 * prompt exactly as `prompt_logprobs` does; `top_logprobs` and `logprobs` return alternatives in
 * OpenAI's shapes; content parts and the developer role render; the reasoning field is `reasoning`;
 * `/tokenize`, `/detokenize`, `/version` and `/metrics` answer as vLLM's do; `tool_choice` naming a
 * function returns a call of it whose arguments fit its schema.
 */

import assert from "node:assert/strict";
import { type Loose, openAiServer } from "../helpers/openai_server.ts";
import { loadPolicy } from "../../lib/engine/worker_policy.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

/** The client's stream of chunks (its overloads cannot tell from an untyped body that it streams). */
function chunks(answer: unknown): AsyncIterable<Loose> {
  return answer as AsyncIterable<Loose>;
}

const CHAT = {
  messages: [{ role: "user", content: "Say something." }],
  chat_template_kwargs: { enable_thinking: false },
};

Deno.test("streamed and unstreamed completions and chat give the same tokens for the same seed", async () => {
  const s = await openAiServer();
  try {
    const body: Loose = {
      model: s.model,
      prompt: "Once upon",
      max_tokens: 16,
      seed: 7,
      logprobs: 1,
      ignore_eos: true,
    };
    const whole = await s.client.completions.create(body);
    let text = "";
    const tokens: string[] = [];
    const lps: number[] = [];
    let finish = null;
    for await (const chunk of chunks(await s.client.completions.create({ ...body, stream: true }))) {
      const c = chunk.choices[0];
      text += c.text;
      tokens.push(...(c.logprobs?.tokens ?? []));
      lps.push(...(c.logprobs?.token_logprobs ?? []) as number[]);
      finish = c.finish_reason ?? finish;
    }
    assert.equal(text, whole.choices[0].text);
    assert.deepEqual(tokens, whole.choices[0].logprobs!.tokens);
    assert.deepEqual(lps, whole.choices[0].logprobs!.token_logprobs);
    assert.equal(finish, whole.choices[0].finish_reason);

    const chat: Loose = { model: s.model, ...CHAT, max_tokens: 16, seed: 3, logprobs: true };
    const answer = await s.client.chat.completions.create(chat);
    let content = "";
    const chatTokens: string[] = [];
    let usage = null;
    const stream = await s.client.chat.completions.create({
      ...chat,
      stream: true,
      stream_options: { include_usage: true },
    });
    for await (const chunk of chunks(stream)) {
      if (chunk.usage) usage = chunk.usage;
      const c = chunk.choices[0];
      content += c?.delta.content ?? "";
      chatTokens.push(...(c?.logprobs?.content ?? []).map((e: { token: string }) => e.token));
    }
    assert.equal(content, answer.choices[0].message.content);
    assert.deepEqual(chatTokens, answer.choices[0].logprobs!.content!.map((e) => e.token));
    assert.deepEqual(usage, answer.usage, "include_usage: the last chunk carries the usage");
  } finally {
    await s.close();
  }
});

Deno.test("n: 3 returns three choices; choice 0 is the n: 1 answer", async () => {
  const s = await openAiServer();
  try {
    const body: Loose = { model: s.model, prompt: [1, 2, 3], max_tokens: 8, seed: 11, ignore_eos: true };
    const three = await s.client.completions.create({ ...body, n: 3 });
    const one = await s.client.completions.create(body);
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(three.choices[0].text, one.choices[0].text);
    assert.equal(new Set(three.choices.map((c) => c.text)).size, 3, "three different samples");
    assert.equal(three.usage!.completion_tokens, 24);
    const chat = await s.client.chat.completions.create(
      { model: s.model, ...CHAT, max_tokens: 4, n: 3 } as Loose,
    );
    assert.equal(chat.choices.length, 3);
    const batch = await s.client.completions.create({ ...body, prompt: [[1, 2], [3, 4]], n: 2 });
    assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2, 3], "batched prompts: choice p·n + i");
  } finally {
    await s.close();
  }
});

Deno.test("stop strings stop at their first match, trimmed unless include_stop_str_in_output, streamed too", async () => {
  const s = await openAiServer();
  try {
    const body: Loose = {
      model: s.model,
      prompt: "The",
      max_tokens: 30,
      seed: 2,
      ignore_eos: true,
      temperature: 0,
    };
    const full = (await s.client.completions.create(body)).choices[0].text;
    const stop = full.slice(10, 13);
    const at = full.indexOf(stop);
    const cut = await s.client.completions.create({ ...body, stop: [stop, "\u0000never"] });
    assert.equal(cut.choices[0].text, full.slice(0, at));
    assert.equal(cut.choices[0].finish_reason, "stop");
    assert.equal((cut.choices[0] as Loose).stop_reason, stop);
    assert.ok(cut.usage!.completion_tokens < 30);
    const kept = await s.client.completions.create({ ...body, stop, include_stop_str_in_output: true });
    assert.equal(kept.choices[0].text, full.slice(0, at + stop.length));
    let streamed = "";
    for await (
      const chunk of chunks(await s.client.completions.create({ ...body, stop: [stop], stream: true }))
    ) {
      streamed += chunk.choices[0]?.text ?? "";
    }
    assert.equal(streamed, full.slice(0, at));
  } finally {
    await s.close();
  }
});

Deno.test("echo + max_tokens 1 + logprobs scores the prompt as prompt_logprobs does", async () => {
  const s = await openAiServer();
  try {
    const prompt = [11, 22, 33, 44, 55, 66];
    const echo = await s.client.completions.create(
      { model: s.model, prompt, echo: true, max_tokens: 1, logprobs: 2, temperature: 1 } as Loose,
    );
    const lp = echo.choices[0].logprobs!;
    assert.equal(lp.token_logprobs![0], null);
    assert.equal(lp.tokens!.length, prompt.length + 1);
    const scored = await s.client.completions.create(
      { model: s.model, prompt, max_tokens: 1, prompt_logprobs: 2, temperature: 1 } as Loose,
    );
    const promptLps = (scored.choices[0] as Loose)
      .prompt_logprobs as (Record<string, { logprob: number }> | null)[];
    for (let t = 1; t < prompt.length; t++) {
      assert.equal(lp.token_logprobs![t], promptLps[t]![String(prompt[t])].logprob, `position ${t}`);
      assert.ok(Object.keys(lp.top_logprobs![t]!).length >= 2, "two alternatives at each prompt position");
    }
    const [engine] = await s.policy.logprobs([prompt]);
    for (let t = 1; t < prompt.length; t++) assert.ok(Math.abs(lp.token_logprobs![t]! - engine[t]) < 1e-6);
  } finally {
    await s.close();
  }
});

Deno.test("top_logprobs: 5 returns five alternatives per token in OpenAI's shape, with bytes", async () => {
  const s = await openAiServer();
  try {
    const answer = await s.client.chat.completions.create(
      { model: s.model, ...CHAT, max_tokens: 6, logprobs: true, top_logprobs: 5 } as Loose,
    );
    const content = answer.choices[0].logprobs!.content!;
    assert.equal(content.length, answer.usage!.completion_tokens);
    for (const entry of content) {
      assert.equal(typeof entry.token, "string");
      assert.deepEqual(entry.bytes, Array.from(new TextEncoder().encode(entry.token)));
      assert.equal(entry.top_logprobs.length, 5);
      const values = entry.top_logprobs.map((t) => t.logprob);
      assert.deepEqual(values, [...values].sort((a, b) => b - a), "most likely first");
      entry.top_logprobs.forEach((t) =>
        assert.deepEqual(t.bytes, Array.from(new TextEncoder().encode(t.token)))
      );
      assert.ok(entry.logprob <= values[0] + 1e-6);
    }
    const completion = await s.client.completions.create(
      { model: s.model, prompt: "Hi", max_tokens: 4, logprobs: 5, ignore_eos: true } as Loose,
    );
    for (const top of completion.choices[0].logprobs!.top_logprobs!) assert.ok(Object.keys(top).length >= 5);
  } finally {
    await s.close();
  }
});

Deno.test("content parts and the developer role render as text and system; reasoning comes back as `reasoning`", async () => {
  const s = await openAiServer();
  try {
    const parts = await s.client.chat.completions.create({
      model: s.model,
      messages: [
        { role: "developer", content: [{ type: "text", text: "Be brief." }] },
        { role: "user", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }] },
      ],
      max_tokens: 1,
    } as Loose);
    const plain = await s.client.chat.completions.create({
      model: s.model,
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "a\nb" }],
      max_tokens: 1,
    } as Loose);
    assert.equal(parts.usage!.prompt_tokens, plain.usage!.prompt_tokens);
    const thinking = await s.client.chat.completions.create(
      {
        model: s.model,
        messages: [{ role: "user", content: "Hi" }],
        max_tokens: 5,
        ignore_eos: true,
      } as Loose,
    );
    const message = thinking.choices[0].message as Loose;
    assert.equal(typeof message.reasoning, "string", "thinking on, no </think>: the text is reasoning");
    assert.equal(message.content, null);
    assert.equal("reasoning_content" in message, false);
  } finally {
    await s.close();
  }
});

Deno.test("/tokenize, /detokenize, /version and /metrics answer in vLLM's shapes", async () => {
  const s = await openAiServer();
  try {
    const post = async (path: string, body: unknown) =>
      await (await fetch(s.server.url + path, { method: "POST", body: JSON.stringify(body) })).json();
    const tokens = await post("/tokenize", { prompt: "Hello world", return_token_strs: true });
    assert.equal(tokens.count, tokens.tokens.length);
    assert.equal(tokens.max_model_len, 512);
    assert.equal(tokens.token_strs.join(""), "Hello world");
    assert.deepEqual(await post("/detokenize", { tokens: tokens.tokens }), { prompt: "Hello world" });
    const chat = await post("/tokenize", {
      messages: [{ role: "user", content: "Hi" }],
      add_generation_prompt: true,
    });
    const answer = await s.client.chat.completions.create({
      model: s.model,
      messages: [{ role: "user", content: "Hi" }],
      max_tokens: 2,
    });
    assert.equal(
      chat.count,
      answer.usage!.prompt_tokens,
      "the chat template's tokens, as the route renders them",
    );
    assert.match((await (await fetch(s.server.url + "/version")).json()).version, /^\d+\.\d+\.\d+/);
    const metrics = await (await fetch(s.server.url + "/metrics")).text();
    assert.match(metrics, /^# TYPE vllm:num_requests_running gauge$/m);
    assert.match(metrics, /^vllm:generation_tokens_total\{model_name="tiny"\} 2$/m);
    assert.match(metrics, /^vllm:e2e_request_latency_seconds_count \d+$/m);
    assert.match(
      metrics,
      /deno_rl:http_requests_total\{model_name="tiny",route="\/v1\/chat\/completions",status="200"\} 1/,
    );
  } finally {
    await s.close();
  }
});

Deno.test("a streaming client that disconnects cancels its sequence", async () => {
  // As `deno task serve` runs: the policy in a Worker (the server's thread stays free to see the hang-up).
  const s = await openAiServer(await loadPolicy(await makeTinyModel(), { maxSequences: 4 }));
  try {
    const client = new AbortController();
    const response = await fetch(`${s.server.url}/v1/completions`, {
      method: "POST",
      body: JSON.stringify({
        model: s.model,
        prompt: [1, 2, 3],
        max_tokens: 400,
        ignore_eos: true,
        stream: true,
      }),
      signal: client.signal,
    });
    const reader = response.body!.getReader();
    assert.match(new TextDecoder().decode((await reader.read()).value), /^data: \{/);
    client.abort();
    await reader.cancel().catch(() => {});
    // Once nothing runs (had the sequence decoded on, that is after all 400 tokens), count what was decoded.
    for (
      let i = 0;
      i < 6000 && /^vllm:num_requests_running\S* [1-9]/m.test(await metrics(s.server.url));
      i++
    ) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const { decodeTokens } = await s.policy.sequenceStats();
    assert.ok(decodeTokens < 400, `${decodeTokens} tokens decoded in all`);
  } finally {
    await s.close();
  }
});

async function metrics(url: string): Promise<string> {
  return await (await fetch(`${url}/metrics`)).text();
}

/** A tool whose arguments the call guide covers entirely (an enum, a boolean): every reply is finite. */
const WEATHER = {
  type: "function" as const,
  function: {
    name: "weather",
    parameters: {
      type: "object",
      properties: { unit: { type: "string", enum: ["c", "f"] }, daily: { type: "boolean" } },
      required: ["unit", "daily"],
    },
  },
};
const OTHER = {
  type: "function" as const,
  function: { name: "other", parameters: { type: "object", properties: { n: { type: "integer" } } } },
};

Deno.test("tool_choice naming a function returns a call of it with arguments valid for its schema; an unknown name is a 400", async () => {
  const s = await openAiServer();
  try {
    for (const seed of [1, 2, 3]) {
      const answer = await s.client.chat.completions.create({
        model: s.model,
        ...CHAT,
        tools: [OTHER, WEATHER],
        tool_choice: { type: "function", function: { name: "weather" } },
        max_tokens: 64,
        seed,
      } as Loose);
      const [call, ...more]: Loose[] = answer.choices[0].message.tool_calls ?? [];
      assert.equal(more.length, 0, `seed ${seed}: one call`);
      assert.equal(call.function.name, "weather");
      const args = JSON.parse(call.function.arguments);
      assert.deepEqual(Object.keys(args), ["unit", "daily"], `seed ${seed}: ${call.function.arguments}`);
      assert.ok(["c", "f"].includes(args.unit) && typeof args.daily === "boolean", call.function.arguments);
    }
    const required = await s.client.chat.completions.create({
      model: s.model,
      ...CHAT,
      tools: [WEATHER],
      tool_choice: "required",
      max_tokens: 64,
    } as Loose);
    const [called]: Loose[] = required.choices[0].message.tool_calls ?? [];
    assert.equal(called?.function.name, "weather", "required: a call of an offered tool");
    assert.deepEqual(Object.keys(JSON.parse(called.function.arguments)), ["unit", "daily"]);
    const error = await s.client.chat.completions.create({
      model: s.model,
      ...CHAT,
      tools: [WEATHER],
      tool_choice: { type: "function", function: { name: "nope" } },
    } as Loose).catch((e) => e);
    assert.equal(error.status, 400);
    assert.equal(error.param, "tool_choice");
    assert.match(error.message, /"nope", which is not among the tools \("weather"\); name one of them/);
    assert.ok(!error.message.includes("\n"), "one line");
  } finally {
    await s.close();
  }
});
