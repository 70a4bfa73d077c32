/**
 * Every request parameter `deno task serve` knows, per route, and what it does with each
 * (docs/serving.md, "Parameters"): honoured (read by request.ts or the route), accepted only at the
 * value that changes nothing (vLLM's default, e.g. `repetition_penalty: 1`), or refused. A parameter
 * that is not in the table, or a known one at a value the server cannot honour, gets 400 naming it:
 * never a 200 that quietly did something else.
 *
 * @module
 */

import { HttpError } from "./limits.ts";

export type Route = "completions" | "chat" | "tokenize" | "detokenize";

type Json = Record<string, unknown>;

/** How a parameter is treated: read by the route, or allowed only where `ok` holds. */
type Rule = "honoured" | { ok: (v: unknown) => boolean; want: string };

const C: Route[] = ["completions"];
const CH: Route[] = ["chat"];
const BOTH: Route[] = ["completions", "chat"];

const only = (want: string, ...values: unknown[]): Rule => ({
  ok: (v) => values.some((x) => JSON.stringify(x) === JSON.stringify(v)),
  want,
});
const absent: Rule = { ok: () => false, want: "leave it out" };

/** Parameter → routes and rule. `null` is always the same as leaving a parameter out. */
const TABLE: Record<string, [Route[], Rule]> = {
  model: [["completions", "chat", "tokenize", "detokenize"], "honoured"],
  prompt: [["completions", "tokenize"], "honoured"],
  messages: [["chat", "tokenize"], "honoured"],
  tokens: [["detokenize"], "honoured"],
  // Sampling.
  temperature: [BOTH, "honoured"],
  top_p: [BOTH, "honoured"],
  top_k: [BOTH, "honoured"],
  seed: [BOTH, "honoured"],
  n: [BOTH, "honoured"],
  best_of: [BOTH, "honoured"], // equal to n only (request.ts)
  max_tokens: [BOTH, "honoured"],
  max_completion_tokens: [CH, "honoured"],
  min_tokens: [BOTH, "honoured"],
  stop: [BOTH, "honoured"],
  stop_token_ids: [BOTH, "honoured"],
  include_stop_str_in_output: [BOTH, "honoured"],
  ignore_eos: [BOTH, "honoured"],
  logit_bias: [BOTH, "honoured"],
  allowed_token_ids: [BOTH, "honoured"],
  bad_words: [BOTH, "honoured"],
  presence_penalty: [BOTH, "honoured"],
  frequency_penalty: [BOTH, "honoured"],
  repetition_penalty: [BOTH, only("1 (not implemented)", 1)],
  min_p: [BOTH, only("0 (not implemented)", 0)],
  length_penalty: [BOTH, only("1 (beam search only)", 1)],
  use_beam_search: [BOTH, only("false (no beam search)", false)],
  // Outputs.
  logprobs: [BOTH, "honoured"],
  top_logprobs: [CH, "honoured"],
  prompt_logprobs: [BOTH, "honoured"],
  echo: [C, "honoured"],
  skip_special_tokens: [BOTH, "honoured"],
  spaces_between_special_tokens: [BOTH, only("true (the tokenizer's own decoding)", true)],
  return_token_ids: [BOTH, "honoured"],
  return_tokens_as_token_ids: [BOTH, "honoured"],
  stream: [BOTH, "honoured"],
  stream_options: [BOTH, "honoured"],
  truncate_prompt_tokens: [BOTH, absent],
  add_special_tokens: [
    ["completions", "chat", "tokenize"],
    only("false (Qwen3's tokenizer adds none)", false),
  ],
  // Chat.
  tools: [["chat", "tokenize"], "honoured"],
  tool_choice: [CH, "honoured"],
  parallel_tool_calls: [CH, "honoured"],
  chat_template_kwargs: [["chat", "tokenize"], "honoured"],
  add_generation_prompt: [["chat", "tokenize"], "honoured"],
  continue_final_message: [["chat", "tokenize"], "honoured"],
  chat_template: [["chat", "tokenize"], absent],
  documents: [["chat", "tokenize"], absent],
  response_format: [BOTH, only('{"type": "text"} (no guided decoding)', { type: "text" })],
  guided_json: [BOTH, absent],
  guided_regex: [BOTH, absent],
  guided_choice: [BOTH, absent],
  guided_grammar: [BOTH, absent],
  guided_decoding_backend: [BOTH, absent],
  guided_whitespace_pattern: [BOTH, absent],
  structured_outputs: [BOTH, absent],
  reasoning_effort: [CH, absent],
  include_reasoning: [CH, only("true (the reasoning is always returned)", true)],
  functions: [CH, absent],
  function_call: [CH, absent],
  // Request bookkeeping that changes no output.
  user: [BOTH, "honoured"],
  request_id: [BOTH, "honoured"],
  priority: [BOTH, only("0 (first come, first served)", 0)],
  suffix: [C, absent],
  logits_processors: [BOTH, absent],
  store: [CH, only("false (nothing is stored)", false)],
  // `episode_id` / `group_id` name a recorded episode (`--record`, lib/serve/gateway/); OpenAI's own limits.
  metadata: [CH, {
    ok: (v) =>
      v !== null && typeof v === "object" && !Array.isArray(v) &&
      Object.values(v).every((x) => typeof x === "string" && x.length <= 512),
    want: "an object of string values (episode_id, group_id)",
  }],
  return_token_strs: [["tokenize"], "honoured"],
};

/**
 * Throws 400 naming the first parameter of `body` that `route` does not know, or that is set to a value
 * the server cannot honour. Honoured parameters are checked by the code that reads them.
 */
export function checkParameters(body: Json, route: Route): void {
  for (const [key, value] of Object.entries(body)) {
    const entry = TABLE[key];
    if (!entry || !entry[0].includes(route)) {
      throw new HttpError(
        400,
        `unknown parameter ${key} for ${ROUTE_PATHS[route]}; remove it`,
        "BadRequestError",
        key,
      );
    }
    const rule = entry[1];
    if (value === null || rule === "honoured" || rule.ok(value)) continue;
    throw new HttpError(
      400,
      `${key} = ${JSON.stringify(value)} is not supported by deno task serve; use ${rule.want}`,
      "BadRequestError",
      key,
    );
  }
}

/** Names of every parameter of `route`, for the docs and tests. */
export function parametersOf(route: Route): string[] {
  return Object.entries(TABLE).filter(([, [routes]]) => routes.includes(route)).map(([key]) => key);
}

const ROUTE_PATHS: Record<Route, string> = {
  completions: "/v1/completions",
  chat: "/v1/chat/completions",
  tokenize: "/tokenize",
  detokenize: "/detokenize",
};
