/**
 * The SGLang dialect: native `POST /generate` with `input_ids`, `sampling_params`, `return_logprob`,
 * `logprob_start_len` and `lora_path`; log-probs from `meta_info.output_token_logprobs` and
 * `meta_info.input_token_logprobs`, entries `[logprob, token_id, text]` matched by token id; runtime
 * LoRA through `/load_lora_adapter` and `/unload_lora_adapter`.
 *
 * @module
 */

import type { Generation } from "../policy.ts";
import type { ServerClient } from "./http.ts";
import { badAnswer, type ScoreRequest, type ServerDialect, type TurnRequest, unclamp } from "./protocol.ts";
import { parseModels } from "./vllm.ts";

type Json = Record<string, unknown>;

/** Body of `POST /generate` for one turn. */
export function sglangGenerateBody(r: TurnRequest): Json {
  const o = r.options;
  return {
    input_ids: [...r.tokens],
    sampling_params: {
      max_new_tokens: r.maxTokens,
      temperature: o.temperature ?? 1,
      top_p: o.topP ?? 1,
      top_k: o.topK ? o.topK : -1,
      min_p: 0,
      repetition_penalty: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      stop_token_ids: [...(o.stopTokens ?? [])],
      ignore_eos: true,
      skip_special_tokens: false,
      no_stop_trim: true,
      sampling_seed: r.seed,
    },
    return_logprob: true,
    // -1: log-probs of the output only.
    logprob_start_len: -1,
    top_logprobs_num: 0,
    ...(r.isAdapter ? { lora_path: r.model } : {}),
    stream: false,
  };
}

/** Body of a scoring request: the prompt's log-probs from position 0, one token generated. */
export function sglangScoreBody(r: ScoreRequest): Json {
  return {
    input_ids: [...r.tokens],
    sampling_params: { max_new_tokens: 1, temperature: r.temperature, top_p: 1, top_k: -1, min_p: 0 },
    return_logprob: true,
    logprob_start_len: 0,
    top_logprobs_num: 0,
    ...(r.isAdapter ? { lora_path: r.model } : {}),
    stream: false,
  };
}

function metaInfo(client: ServerClient, body: unknown): Json {
  const item = Array.isArray(body) ? body[0] : body;
  const meta = (item as Json | null)?.meta_info;
  if (!meta || typeof meta !== "object") throw badAnswer(client, "no meta_info", body);
  return meta as Json;
}

/** `[logprob, token_id, text?]` triples as a list of `{ id, logprob }`. */
function triples(
  client: ServerClient,
  list: unknown,
  body: unknown,
): { id: number; logprob: number | null }[] {
  if (!Array.isArray(list)) throw badAnswer(client, "token log-probs are not a list", body);
  return list.map((entry) => {
    if (!Array.isArray(entry) || !Number.isInteger(entry[1])) {
      throw badAnswer(client, "a token log-prob entry is not [logprob, token_id, text]", body);
    }
    return { id: entry[1] as number, logprob: typeof entry[0] === "number" ? entry[0] : null };
  });
}

/** A turn from a `/generate` answer: output ids and their log-probs, matched by id. */
export function parseSglangTurn(client: ServerClient, body: unknown): Generation {
  const meta = metaInfo(client, body);
  const item = (Array.isArray(body) ? body[0] : body) as Json;
  const entries = triples(client, meta.output_token_logprobs, body);
  const tokens = Array.isArray(item.output_ids) ? (item.output_ids as number[]) : entries.map((e) => e.id);
  if (tokens.length !== entries.length) {
    throw badAnswer(client, "output_ids and log-probs do not line up", body);
  }
  const logprobs = tokens.map((id, i) => {
    if (entries[i].id !== id || entries[i].logprob === null) {
      throw badAnswer(client, `no log-prob for token ${id} at output position ${i}`, body);
    }
    return unclamp(entries[i].logprob!);
  });
  const reason = (meta.finish_reason as Json | null)?.type ?? meta.finish_reason;
  if (reason !== "stop" && reason !== "length") {
    throw badAnswer(
      client,
      `finish_reason ${JSON.stringify(meta.finish_reason)} (the request did not finish)`,
      body,
    );
  }
  return { tokens, logprobs, finishReason: reason };
}

/** Prompt log-probs from `input_token_logprobs` (entry 0 has a null log-prob), matched by id. */
export function parseSglangPromptLogprobs(
  client: ServerClient,
  body: unknown,
  tokens: readonly number[],
): Float32Array {
  const entries = triples(client, metaInfo(client, body).input_token_logprobs, body);
  if (entries.length !== tokens.length) {
    throw badAnswer(client, `input_token_logprobs for ${tokens.length} tokens`, body);
  }
  const out = new Float32Array(tokens.length);
  out[0] = NaN;
  for (let t = 1; t < tokens.length; t++) {
    if (entries[t].id !== tokens[t] || entries[t].logprob === null) {
      throw badAnswer(client, `input_token_logprobs[${t}] is not for token ${tokens[t]}`, body);
    }
    out[t] = unclamp(entries[t].logprob!);
  }
  return out;
}

export class SglangDialect implements ServerDialect {
  readonly name = "sglang";

  init(): Promise<void> {
    return Promise.resolve();
  }

  async baseModel(client: ServerClient): Promise<string> {
    return parseModels(client, await client.get("/v1/models"));
  }

  async generate(client: ServerClient, request: TurnRequest): Promise<Generation> {
    if (request.maxTokens <= 0) return { tokens: [], logprobs: [], finishReason: "length" };
    return parseSglangTurn(
      client,
      await client.post("/generate", sglangGenerateBody(request), request.signal),
    );
  }

  async score(client: ServerClient, request: ScoreRequest): Promise<Float32Array> {
    const body = await client.post("/generate", sglangScoreBody(request));
    return parseSglangPromptLogprobs(client, body, request.tokens);
  }

  async loadAdapter(client: ServerClient, name: string, path: string): Promise<void> {
    await client.post("/load_lora_adapter", { lora_name: name, lora_path: path });
  }

  async unloadAdapter(client: ServerClient, name: string): Promise<void> {
    await client.post("/unload_lora_adapter", { lora_name: name });
  }
}
