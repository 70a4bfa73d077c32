/**
 * The vLLM dialect: `POST /v1/completions` with the prompt as token ids (or `/inference/v1/generate`,
 * vLLM's token-in-token-out endpoint, where the server has it: probed once, a 404 means it has not),
 * scoring through `prompt_logprobs`, and runtime LoRA loading (`/v1/load_lora_adapter`).
 *
 * Every request sends the neutral sampling parameters (top_k -1, min_p 0, penalties off) besides ours,
 * and `ignore_eos` with our stop tokens, so that the server's defaults (a model's
 * generation_config.json) never change what is sampled. Log-probs are looked up by token id, never
 * by position in a list: `token_id:N` strings (return_tokens_as_token_ids) and prompt_logprobs keyed
 * by id. Clamped log-probs (-9999, vLLM's stand-in for -inf) become -Infinity.
 *
 * @module
 */

import type { Generation } from "../policy.ts";
import type { ServerClient } from "./http.ts";
import {
  badAnswer,
  type ScoreRequest,
  type ServerDialect,
  tokenIdOf,
  type TurnRequest,
  unclamp,
} from "./protocol.ts";

type Json = Record<string, unknown>;

/** The sampling fields shared by both endpoints. */
export function vllmSampling(r: TurnRequest): Json {
  const o = r.options;
  return {
    max_tokens: r.maxTokens,
    temperature: o.temperature ?? 1,
    top_p: o.topP ?? 1,
    top_k: o.topK ? o.topK : -1,
    min_p: 0,
    repetition_penalty: 1,
    presence_penalty: 0,
    frequency_penalty: 0,
    seed: r.seed,
    stop_token_ids: [...(o.stopTokens ?? [])],
    ignore_eos: true,
    skip_special_tokens: false,
    logprobs: 0,
  };
}

/** Body of `POST /v1/completions` for one turn. */
export function completionBody(r: TurnRequest): Json {
  return {
    model: r.model,
    prompt: [...r.tokens],
    ...vllmSampling(r),
    n: 1,
    stream: false,
    return_token_ids: true,
    return_tokens_as_token_ids: true,
  };
}

/** Body of `POST /inference/v1/generate` for one turn. */
export function generateBody(r: TurnRequest): Json {
  return { model: r.model, token_ids: [...r.tokens], sampling_params: vllmSampling(r), stream: false };
}

/** Body of a scoring request: one token generated, the prompt's log-probs returned. */
export function scoreBody(r: ScoreRequest): Json {
  return {
    model: r.model,
    prompt: [...r.tokens],
    max_tokens: 1,
    temperature: r.temperature,
    top_p: 1,
    top_k: -1,
    min_p: 0,
    repetition_penalty: 1,
    seed: 0,
    prompt_logprobs: 1,
    n: 1,
    stream: false,
    return_token_ids: true,
    return_tokens_as_token_ids: true,
    skip_special_tokens: false,
  };
}

/** The first choice of a completions-style answer. */
function firstChoice(client: ServerClient, body: unknown): Json {
  const choice = (body as Json | null)?.choices;
  if (!Array.isArray(choice) || typeof choice[0] !== "object" || choice[0] === null) {
    throw badAnswer(client, "no choices[0]", body);
  }
  return choice[0] as Json;
}

/** `finish_reason` as ours; an aborted request is an error. */
export function finishOf(client: ServerClient, reason: unknown, body: unknown): "stop" | "length" {
  if (reason === "stop" || reason === "length") return reason;
  throw badAnswer(client, `finish_reason ${JSON.stringify(reason)} (the request did not finish)`, body);
}

/**
 * A turn from a completions answer (`/v1/completions`) or a generate answer (`/inference/v1/generate`):
 * token ids from `token_ids` (else from the `token_id:N` strings), each log-prob looked up by its id in
 * `top_logprobs` or `logprobs.content`, checked against the id the token list names.
 */
export function parseTurn(client: ServerClient, body: unknown): Generation {
  const choice = firstChoice(client, body);
  const lp = (choice.logprobs ?? null) as Json | null;
  if (!lp) throw badAnswer(client, "no logprobs in choices[0] (send logprobs: 0)", body);
  const entries = logprobEntries(lp);
  const tokens = Array.isArray(choice.token_ids)
    ? (choice.token_ids as unknown[]).map(Number)
    : entries.map((e) => e.id);
  if (tokens.some((t) => !Number.isInteger(t) || t < 0) || tokens.length !== entries.length) {
    throw badAnswer(client, "token ids and log-probs do not line up", body);
  }
  const logprobs = tokens.map((id, i) => {
    const value = entries[i].byId.get(id);
    if (value === undefined) {
      throw badAnswer(client, `no log-prob for token ${id} at output position ${i}`, body);
    }
    return unclamp(value);
  });
  return { tokens, logprobs, finishReason: finishOf(client, choice.finish_reason, body) };
}

interface LogprobEntry {
  /** The token this position names. */
  id: number;
  /** Log-probs at this position, by token id. */
  byId: Map<number, number>;
}

/** Per-position entries of OpenAI completions logprobs or of chat-style `content` logprobs. */
function logprobEntries(lp: Json): LogprobEntry[] {
  if (Array.isArray(lp.content)) {
    return (lp.content as Json[]).map((c) => {
      const id = tokenIdOf(c.token);
      const byId = new Map<number, number>([[id, Number(c.logprob)]]);
      for (const top of (c.top_logprobs ?? []) as Json[]) byId.set(tokenIdOf(top.token), Number(top.logprob));
      return { id, byId };
    });
  }
  const names = (lp.tokens ?? []) as unknown[];
  const values = (lp.token_logprobs ?? []) as unknown[];
  const tops = (lp.top_logprobs ?? []) as (Json | null)[];
  return names.map((name, i) => {
    const id = tokenIdOf(name);
    const byId = new Map<number, number>();
    if (typeof values[i] === "number") byId.set(id, values[i] as number);
    for (const [key, value] of Object.entries(tops[i] ?? {})) byId.set(tokenIdOf(key), Number(value));
    return { id, byId };
  });
}

/**
 * Scoring answer → log-probs of the prompt tokens: `prompt_logprobs[t]` is a map from token id (as a
 * string, or `token_id:N`) to `{ logprob }`, holding the top tokens and the prompt's own; entry 0 null.
 */
export function parsePromptLogprobs(
  client: ServerClient,
  body: unknown,
  tokens: readonly number[],
): Float32Array {
  const choice = firstChoice(client, body);
  const list = (choice.prompt_logprobs ?? (body as Json).prompt_logprobs) as (Json | null)[] | undefined;
  if (!Array.isArray(list) || list.length !== tokens.length) {
    throw badAnswer(client, `prompt_logprobs for ${tokens.length} tokens`, body);
  }
  const out = new Float32Array(tokens.length);
  out[0] = NaN;
  for (let t = 1; t < tokens.length; t++) {
    const entry = list[t] ?? {};
    const hit = (entry[String(tokens[t])] ?? entry[`token_id:${tokens[t]}`]) as Json | number | undefined;
    const value = typeof hit === "number" ? hit : hit?.logprob;
    if (typeof value !== "number") {
      throw badAnswer(client, `prompt_logprobs[${t}] has no entry for token ${tokens[t]}`, body);
    }
    out[t] = unclamp(value);
  }
  return out;
}

/** The base model: the first entry of `/v1/models` that is not an adapter (`parent` null). */
export function parseModels(client: ServerClient, body: unknown): string {
  const data = (body as Json | null)?.data;
  if (!Array.isArray(data)) throw badAnswer(client, "no data[] in /v1/models", body);
  const base = (data as Json[]).find((m) => !m.parent) ?? data[0];
  if (typeof base?.id !== "string") throw badAnswer(client, "no model id in /v1/models", body);
  return base.id;
}

export class VllmDialect implements ServerDialect {
  readonly name = "vllm";
  /** Servers known to have `/inference/v1/generate`. */
  readonly #generateEndpoint = new Map<string, boolean>();

  async init(client: ServerClient): Promise<void> {
    // An empty body is refused (400 / 422) by a server that has the endpoint, 404 by one that has not.
    const { status } = await client.probe("POST", "/inference/v1/generate", {});
    this.#generateEndpoint.set(client.url, status !== 404 && status !== 405);
  }

  async baseModel(client: ServerClient): Promise<string> {
    return parseModels(client, await client.get("/v1/models"));
  }

  async generate(client: ServerClient, request: TurnRequest): Promise<Generation> {
    if (request.maxTokens <= 0) return { tokens: [], logprobs: [], finishReason: "length" };
    const body = this.#generateEndpoint.get(client.url)
      ? await client.post("/inference/v1/generate", generateBody(request), request.signal)
      : await client.post("/v1/completions", completionBody(request), request.signal);
    return parseTurn(client, body);
  }

  async score(client: ServerClient, request: ScoreRequest): Promise<Float32Array> {
    const body = await client.post("/v1/completions", scoreBody(request));
    return parsePromptLogprobs(client, body, request.tokens);
  }

  async loadAdapter(client: ServerClient, name: string, path: string): Promise<void> {
    await client.post("/v1/load_lora_adapter", { lora_name: name, lora_path: path });
  }

  async unloadAdapter(client: ServerClient, name: string): Promise<void> {
    await client.post("/v1/unload_lora_adapter", { lora_name: name });
  }
}
