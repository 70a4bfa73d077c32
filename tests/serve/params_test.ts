/**
 * vLLM's completions and chat request parameters against `deno task serve`, through the official
 * `openai` client (lib/serve/params.ts, docs/serving.md "Parameters"): each row either checks that the
 * parameter has its effect, or that it is refused with a 400 whose message and `param` name it. Nothing
 * is accepted and ignored.
 */

import assert from "node:assert/strict";
import { type Loose, openAiServer } from "../helpers/openai_server.ts";
import { parametersOf } from "../../lib/serve/params.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

type Answer = Loose;
type Call = (extra: Loose) => Promise<Answer>;

/** A row: the parameter, the route, and what it must do. */
type Row = [string, "completions" | "chat", (api: Api) => Promise<void>];

interface Api {
  comp: Call;
  chat: Call;
  ids: (a: Answer) => number[];
  eos: number;
  imEnd: number;
  decode: (ids: number[]) => string;
}

const refused = (param: string, route: "completions" | "chat", value: unknown): Row => [
  param,
  route,
  async (api) => {
    const call = route === "completions" ? api.comp : api.chat;
    const error = await call({ [param]: value }).then(() => null, (e) => e);
    assert.ok(error, `${param}: refused`);
    assert.equal(error.status, 400, `${param}: ${error}`);
    assert.ok(String(error.message).includes(param), `${param} named in: ${error.message}`);
    assert.equal(error.param, param);
  },
];

const ROWS: Row[] = [
  ["temperature", "completions", async ({ comp, ids }) => {
    const [a, b] = [await comp({ temperature: 0, seed: 1 }), await comp({ temperature: 0, seed: 2 })];
    assert.deepEqual(ids(a), ids(b), "greedy ignores the seed");
  }],
  ["top_k", "completions", async ({ comp, ids }) => {
    assert.deepEqual(ids(await comp({ top_k: 1 })), ids(await comp({ temperature: 0 })));
  }],
  ["top_p", "completions", async ({ comp, ids }) => {
    assert.deepEqual(ids(await comp({ top_p: 1e-9 })), ids(await comp({ temperature: 0 })));
  }],
  ["seed", "completions", async ({ comp, ids }) => {
    assert.deepEqual(ids(await comp({ seed: 9 })), ids(await comp({ seed: 9 })));
    assert.notDeepEqual(ids(await comp({ seed: 9 })), ids(await comp({ seed: 10 })));
  }],
  ["n", "completions", async ({ comp }) => assert.equal((await comp({ n: 2 })).choices.length, 2)],
  ["best_of", "completions", async ({ comp }) => {
    assert.equal((await comp({ n: 2, best_of: 2 })).choices.length, 2);
    const error = await comp({ best_of: 3 }).catch((e) => e);
    assert.equal(error.status, 400);
    assert.equal(error.param, "best_of");
  }],
  [
    "max_tokens",
    "completions",
    async ({ comp }) => assert.equal((await comp({ max_tokens: 3 })).usage.completion_tokens, 3),
  ],
  ["stop", "completions", async ({ comp }) => {
    const text = (await comp({ max_tokens: 20 })).choices[0].text as string;
    const stop = text.slice(6, 8);
    assert.equal((await comp({ max_tokens: 20, stop })).choices[0].text, text.slice(0, text.indexOf(stop)));
  }],
  ["include_stop_str_in_output", "completions", async ({ comp }) => {
    const text = (await comp({ max_tokens: 20 })).choices[0].text as string;
    const stop = text.slice(6, 8);
    const kept = await comp({ max_tokens: 20, stop, include_stop_str_in_output: true });
    assert.equal(kept.choices[0].text, text.slice(0, text.indexOf(stop) + 2));
  }],
  ["stop_token_ids", "completions", async ({ comp, ids }) => {
    const stopId = ids(await comp({}))[2];
    const cut = await comp({ stop_token_ids: [stopId] });
    assert.equal(ids(cut).at(-1), stopId);
    assert.equal(cut.choices[0].stop_reason, stopId);
  }],
  ["ignore_eos", "completions", async ({ comp, eos }) => {
    const bias = { logit_bias: { [eos]: 100 } };
    assert.equal((await comp({ ...bias, ignore_eos: false })).usage.completion_tokens, 1);
    assert.equal((await comp({ ...bias, ignore_eos: true })).usage.completion_tokens, 8);
  }],
  ["min_tokens", "completions", async ({ comp, eos }) => {
    const answer = await comp({ logit_bias: { [eos]: 100 }, ignore_eos: false, min_tokens: 4 });
    assert.equal(answer.usage.completion_tokens, 5, "4 tokens, then the end of sequence");
  }],
  ["logit_bias", "completions", async ({ comp, ids }) => {
    assert.deepEqual(ids(await comp({ logit_bias: { 77: 100 } })), new Array(8).fill(77));
  }],
  ["allowed_token_ids", "completions", async ({ comp, ids }) => {
    assert.ok(ids(await comp({ allowed_token_ids: [5, 6, 7] })).every((t) => [5, 6, 7].includes(t)));
  }],
  ["bad_words", "completions", async ({ comp, ids, decode }) => {
    const first = ids(await comp({ temperature: 0 }))[0];
    assert.notEqual(ids(await comp({ temperature: 0, bad_words: [decode([first])] }))[0], first);
  }],
  ["presence_penalty", "completions", async ({ comp, ids }) => {
    const greedy = await comp({ temperature: 0, logprobs: 0 });
    assert.equal(ids(greedy)[1], ids(greedy)[0], "the tiny model repeats its first token");
    const penalized = await comp({ temperature: 0, logprobs: 0, presence_penalty: 2 });
    const drop = greedy.choices[0].logprobs.token_logprobs[1] -
      penalized.choices[0].logprobs.token_logprobs[1];
    assert.ok(Math.abs(drop - 2) < 0.1, `a sampled token loses 2 (in log-prob, about): ${drop}`);
  }],
  ["frequency_penalty", "completions", async ({ comp, ids }) => {
    const repeats = (t: number[]) => t.length - new Set(t).size;
    const greedy = ids(await comp({ temperature: 0 }));
    assert.ok(repeats(ids(await comp({ temperature: 0, frequency_penalty: 2 }))) < repeats(greedy));
  }],
  ["logprobs", "completions", async ({ comp }) => {
    const lp = (await comp({ logprobs: 3 })).choices[0].logprobs;
    assert.equal(lp.token_logprobs.length, 8);
    for (const top of lp.top_logprobs) assert.ok(Object.keys(top).length >= 3);
  }],
  ["prompt_logprobs", "completions", async ({ comp }) => {
    const list = (await comp({ prompt_logprobs: 1 })).choices[0].prompt_logprobs;
    assert.equal(list.length, 4);
    assert.equal(list[0], null);
    assert.ok(list.slice(1).every((p: object) => Object.keys(p).length >= 1));
  }],
  ["echo", "completions", async ({ comp }) => {
    const answer = await comp({ prompt: "Echo me", echo: true });
    assert.ok(answer.choices[0].text.startsWith("Echo me"));
  }],
  ["skip_special_tokens", "completions", async ({ comp, imEnd }) => {
    const only = { allowed_token_ids: [imEnd], ignore_eos: true, max_tokens: 2 };
    assert.equal((await comp(only)).choices[0].text, "");
    assert.equal(
      (await comp({ ...only, skip_special_tokens: false })).choices[0].text,
      "<|im_end|><|im_end|>",
    );
  }],
  ["return_token_ids", "completions", async ({ comp }) => {
    const choice = (await comp({ return_token_ids: true })).choices[0];
    assert.equal(choice.token_ids.length, 8);
    assert.deepEqual(choice.prompt_token_ids, [11, 22, 33, 44]);
  }],
  ["return_tokens_as_token_ids", "completions", async ({ comp }) => {
    const lp = (await comp({ logprobs: 0, return_tokens_as_token_ids: true })).choices[0].logprobs;
    assert.ok(lp.tokens.every((t: string) => /^token_id:\d+$/.test(t)));
  }],
  ["stream_options", "completions", async ({ comp }) => {
    const error = await comp({ stream_options: { include_usage: true } }).catch((e) => e);
    assert.equal(error.status, 400, "only with stream: true (streaming itself: serve_openai_test.ts)");
  }],
  [
    "user",
    "completions",
    async ({ comp, ids }) => assert.deepEqual(ids(await comp({ user: "u1" })), ids(await comp({}))),
  ],
  ["max_completion_tokens", "chat", async ({ chat }) => {
    assert.equal((await chat({ max_completion_tokens: 2, ignore_eos: true })).usage.completion_tokens, 2);
  }],
  ["top_logprobs", "chat", async ({ chat }) => {
    const content = (await chat({ logprobs: true, top_logprobs: 2 })).choices[0].logprobs.content;
    assert.ok(content.every((e: { top_logprobs: unknown[] }) => e.top_logprobs.length === 2));
    const error = await chat({ top_logprobs: 2 }).catch((e) => e);
    assert.equal(error.param, "top_logprobs", "needs logprobs: true");
  }],
  ["chat_template_kwargs", "chat", async ({ chat }) => {
    const on = await chat({ chat_template_kwargs: { enable_thinking: true } });
    const off = await chat({ chat_template_kwargs: { enable_thinking: false } });
    assert.ok(off.usage.prompt_tokens > on.usage.prompt_tokens, "thinking off adds the empty think block");
    const error = await chat({ chat_template_kwargs: { custom: 1 } }).catch((e) => e);
    assert.equal(error.param, "chat_template_kwargs");
  }],
  ["add_generation_prompt", "chat", async ({ chat }) => {
    const without = await chat({ add_generation_prompt: false, chat_template_kwargs: undefined });
    const with_ = await chat({ chat_template_kwargs: undefined });
    assert.ok(without.usage.prompt_tokens < with_.usage.prompt_tokens);
  }],
  ["continue_final_message", "chat", async ({ chat }) => {
    const messages = [{ role: "user", content: "Hi" }, { role: "assistant", content: "Sure, the" }];
    const open = await chat({ messages, continue_final_message: true, add_generation_prompt: false });
    const closed = await chat({ messages, add_generation_prompt: false });
    assert.ok(open.usage.prompt_tokens < closed.usage.prompt_tokens, "the final message is left open");
  }],
  ["tool_choice", "chat", async ({ chat }) => {
    const error = await chat({ tool_choice: "required" }).catch((e) => e);
    assert.equal(error.param, "tool_choice", "required needs tools (with tools: tool_call_table_test.ts)");
  }],
  ["response_format", "chat", async ({ chat }) => {
    assert.equal((await chat({ response_format: { type: "text" } })).choices.length, 1);
    const error = await chat({ response_format: { type: "json_object" } }).catch((e) => e);
    assert.equal(error.param, "response_format");
  }],
  refused("repetition_penalty", "completions", 1.2),
  refused("min_p", "completions", 0.1),
  refused("length_penalty", "completions", 0.5),
  refused("use_beam_search", "completions", true),
  refused("spaces_between_special_tokens", "completions", false),
  refused("truncate_prompt_tokens", "completions", 2),
  refused("add_special_tokens", "completions", true),
  refused("guided_json", "completions", { type: "object" }),
  refused("guided_regex", "completions", "a+"),
  refused("guided_choice", "chat", ["a", "b"]),
  refused("guided_grammar", "chat", "root ::= x"),
  refused("structured_outputs", "chat", { json: {} }),
  refused("suffix", "completions", "end"),
  refused("logits_processors", "completions", ["x"]),
  refused("priority", "completions", 1),
  refused("reasoning_effort", "chat", "low"),
  refused("include_reasoning", "chat", false),
  refused("echo", "chat", true),
  refused("functions", "chat", [{ name: "f" }]),
  refused("chat_template", "chat", "{{ messages }}"),
  refused("store", "chat", true),
  refused("some_unknown_parameter", "completions", 1),
];

Deno.test("every vLLM request parameter is honoured (its effect checked) or refused with a 400 naming it", async () => {
  assert.ok(ROWS.length >= 30, `${ROWS.length} rows`);
  const s = await openAiServer();
  const tokenizer = await loadTokenizer(await makeTinyModel());
  const base = { model: s.model, prompt: [11, 22, 33, 44], max_tokens: 8, seed: 5, ignore_eos: true };
  const chatBase = {
    model: s.model,
    messages: [{ role: "user", content: "Hi" }],
    max_tokens: 4,
    seed: 5,
    chat_template_kwargs: { enable_thinking: false },
  };
  const api: Api = {
    comp: (extra) => s.client.completions.create({ ...base, return_token_ids: true, ...extra }),
    chat: (extra) => s.client.chat.completions.create({ ...chatBase, ...extra }),
    ids: (a) => a.choices[0].token_ids,
    eos: tokenizer.eosTokenId,
    imEnd: tokenizer.special.imEnd,
    decode: (ids) => tokenizer.decode(ids),
  };
  try {
    for (const [param, route, check] of ROWS) {
      assert.ok(
        param === "some_unknown_parameter" || parametersOf(route).includes(param) || param === "echo",
        param,
      );
      try {
        await check(api);
      } catch (e) {
        throw new Error(`${param} (${route}): ${(e as Error).message}`);
      }
    }
  } finally {
    await s.close();
  }
});
