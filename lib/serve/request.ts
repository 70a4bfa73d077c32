/**
 * The sampling and output parameters that completions and chat share, read and checked into one plan
 * (`SamplingPlan`); every bad value is a 400 naming its parameter. What each does is in
 * docs/serving.md ("Parameters"); which parameters exist at all is params.ts.
 *
 * @module
 */

import type { SamplingConstraints } from "../engine/constraints.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import { HttpError } from "./limits.ts";
import { numberField } from "./serve_context.ts";

type Json = Record<string, unknown>;

/** Most alternatives per token (OpenAI's and vLLM's default limit). */
export const MAX_LOGPROBS = 20;
/** Most choices per prompt. */
export const MAX_N = 64;

/** How every choice of a request is sampled and reported. */
export interface SamplingPlan {
  n: number;
  /** Choice i of a prompt samples with `choiceSeed(seed, i)`. */
  seed: number;
  temperature: number;
  topP: number;
  topK: number;
  /** null: as many as the context has room for (chat), or the route's default. */
  maxTokens: number | null;
  stop: string[];
  stopTokenIds: number[];
  includeStop: boolean;
  ignoreEos: boolean;
  /** Constraints except `minTokensBlocked`, which the route fills with its stop tokens. */
  constraints: SamplingConstraints;
  skipSpecial: boolean;
  asIds: boolean;
  returnTokenIds: boolean;
  stream: boolean;
  includeUsage: boolean;
  /** Alternatives per prompt position (null: no prompt log-probs). */
  promptLogprobs: number | null;
}

/** Reads the shared fields of `body`; `vocab` bounds token ids. */
export function samplingPlan(body: Json, vocab: number, tokenizer: ChatTokenizer | null): SamplingPlan {
  const n = numberField(body, "n", 1, 1, MAX_N, true);
  const bestOf = body.best_of;
  if (bestOf !== undefined && bestOf !== null && bestOf !== n) {
    throw new HttpError(
      400,
      `best_of = ${JSON.stringify(bestOf)} is not supported; use best_of = n`,
      undefined,
      "best_of",
    );
  }
  const stream = flag(body, "stream", false);
  const streamOptions = streamOptionsOf(body, stream);
  const maxTokens = body.max_tokens === undefined || body.max_tokens === null
    ? null
    : numberField(body, "max_tokens", 16, 0, Number.MAX_SAFE_INTEGER, true);
  const constraints: SamplingConstraints = {
    logitBias: logitBias(body.logit_bias, vocab),
    allowedTokenIds: body.allowed_token_ids == null
      ? undefined
      : tokenIdList(body.allowed_token_ids, vocab, "allowed_token_ids", false),
    minTokens: numberField(body, "min_tokens", 0, 0, Number.MAX_SAFE_INTEGER, true),
    badWords: badWords(body.bad_words, tokenizer),
    presencePenalty: numberField(body, "presence_penalty", 0, -2, 2),
    frequencyPenalty: numberField(body, "frequency_penalty", 0, -2, 2),
  };
  if (maxTokens !== null && constraints.minTokens! > maxTokens) {
    throw new HttpError(
      400,
      `min_tokens = ${constraints.minTokens} exceeds max_tokens = ${maxTokens}`,
      undefined,
      "min_tokens",
    );
  }
  return {
    n,
    seed: numberField(body, "seed", Math.floor(Math.random() * 2 ** 31), 0, 2 ** 53, true) >>> 0,
    temperature: numberField(body, "temperature", 1, 0, 100),
    topP: numberField(body, "top_p", 1, Number.MIN_VALUE, 1),
    topK: Math.max(0, numberField(body, "top_k", 0, -1, 1e9, true)),
    maxTokens,
    stop: stopStrings(body.stop),
    stopTokenIds: body.stop_token_ids == null
      ? []
      : tokenIdList(body.stop_token_ids, vocab, "stop_token_ids", true),
    includeStop: flag(body, "include_stop_str_in_output", false),
    ignoreEos: flag(body, "ignore_eos", false),
    constraints,
    skipSpecial: flag(body, "skip_special_tokens", true),
    asIds: flag(body, "return_tokens_as_token_ids", false),
    returnTokenIds: flag(body, "return_token_ids", false),
    stream,
    includeUsage: streamOptions.includeUsage,
    promptLogprobs: body.prompt_logprobs == null
      ? null
      : numberField(body, "prompt_logprobs", 0, 0, MAX_LOGPROBS, true),
  };
}

/** The seed of choice `i` of a prompt: choice 0 keeps the request's seed. */
export function choiceSeed(seed: number, i: number): number {
  return i === 0 ? seed : (Math.imul(seed ^ 0x5bd1e995, 0x27d4eb2f) + Math.imul(i, 0x165667b1)) >>> 0;
}

/** A boolean parameter, or its default. */
export function flag(body: Json, key: string, fallback: boolean): boolean {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== "boolean") throw new HttpError(400, `${key} must be true or false`, undefined, key);
  return v;
}

function streamOptionsOf(body: Json, stream: boolean): { includeUsage: boolean } {
  const o = body.stream_options;
  if (o === undefined || o === null) return { includeUsage: false };
  if (!stream) {
    throw new HttpError(
      400,
      "stream_options can only be set when stream is true",
      undefined,
      "stream_options",
    );
  }
  if (typeof o !== "object" || Array.isArray(o)) {
    throw new HttpError(400, "stream_options must be an object", undefined, "stream_options");
  }
  for (const key of Object.keys(o)) {
    if (key !== "include_usage" && key !== "continuous_usage_stats") {
      throw new HttpError(
        400,
        `unknown parameter stream_options.${key}; remove it`,
        undefined,
        "stream_options",
      );
    }
  }
  const options = o as Json;
  if (options.continuous_usage_stats === true) {
    throw new HttpError(
      400,
      "stream_options.continuous_usage_stats is not supported; use include_usage (usage in the last chunk)",
      undefined,
      "stream_options",
    );
  }
  return { includeUsage: flag(options, "include_usage", false) };
}

function stopStrings(stop: unknown): string[] {
  if (stop === undefined || stop === null) return [];
  const list = typeof stop === "string" ? [stop] : stop;
  if (!Array.isArray(list) || list.some((s) => typeof s !== "string" || s.length === 0)) {
    throw new HttpError(400, "stop must be a non-empty string or a list of them", undefined, "stop");
  }
  return list as string[];
}

function tokenIdList(ids: unknown, vocab: number, key: string, allowEmpty: boolean): number[] {
  if (
    !Array.isArray(ids) || (!allowEmpty && ids.length === 0) ||
    ids.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab)
  ) {
    throw new HttpError(
      400,
      `${key} must be a list of token ids of this model (0..${vocab - 1})`,
      undefined,
      key,
    );
  }
  return ids as number[];
}

/** OpenAI's `logit_bias`: token id (as a string key) → bias in [-100, 100]. */
function logitBias(bias: unknown, vocab: number): [number, number][] {
  if (bias === undefined || bias === null) return [];
  if (typeof bias !== "object" || Array.isArray(bias)) {
    throw new HttpError(400, "logit_bias must map token ids to numbers", undefined, "logit_bias");
  }
  return Object.entries(bias as Json).map(([key, value]) => {
    const id = Number(key);
    if (!/^\d+$/.test(key) || id >= vocab) {
      throw new HttpError(
        400,
        `logit_bias key ${JSON.stringify(key)} is not a token id of this model`,
        undefined,
        "logit_bias",
      );
    }
    if (typeof value !== "number" || !(value >= -100 && value <= 100)) {
      throw new HttpError(
        400,
        `logit_bias[${key}] = ${JSON.stringify(value)}; use a number in [-100, 100]`,
        undefined,
        "logit_bias",
      );
    }
    return [id, value];
  });
}

/**
 * vLLM's `bad_words`: strings, each banned as the token sequence it encodes to, written alone and after
 * a space (the two ways it appears in running text).
 */
function badWords(words: unknown, tokenizer: ChatTokenizer | null): number[][] {
  if (words === undefined || words === null) return [];
  if (!Array.isArray(words) || words.some((w) => typeof w !== "string" || w.length === 0)) {
    throw new HttpError(400, "bad_words must be a list of non-empty strings", undefined, "bad_words");
  }
  if (!tokenizer) {
    throw new HttpError(
      400,
      "bad_words needs the model's tokenizer, which this model directory lacks",
      undefined,
      "bad_words",
    );
  }
  const seen = new Set<string>();
  return (words as string[]).flatMap((w) => [tokenizer.encode(w), tokenizer.encode(` ${w.trimStart()}`)])
    .filter((ids) => ids.length > 0 && !seen.has(ids.join(",")) && seen.add(ids.join(",")));
}
