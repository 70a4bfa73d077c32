/**
 * What `ServerPolicy` asks of a server dialect (vllm.ts, sglang.ts): one turn, one scoring call, and
 * LoRA loading, each one HTTP request whose body and answer the dialect owns.
 *
 * @module
 */

import type { GenerateOptions, Generation } from "../policy.ts";
import type { ServerClient } from "./http.ts";

/** One turn of one sequence: every token so far, sent whole (the server's prefix cache reuses them). */
export interface TurnRequest {
  tokens: readonly number[];
  options: GenerateOptions;
  /** The sequence's sampling seed. */
  seed: number;
  /** Most tokens the turn may add (the sequence's capacity left, at most `options.maxNewTokens`). */
  maxTokens: number;
  /** The base model's name or a loaded adapter's. */
  model: string;
  /** Whether `model` names an adapter (SGLang passes it as `lora_path`). */
  isAdapter: boolean;
  /** The sequence's signal: aborting it aborts the request (the server sees the connection close). */
  signal?: AbortSignal;
}

/** A scoring request: log p of every token after the first. */
export interface ScoreRequest {
  tokens: readonly number[];
  temperature: number;
  model: string;
  isAdapter: boolean;
}

/** One server API (vLLM's OpenAI-compatible server, SGLang's native one). */
export interface ServerDialect {
  readonly name: "vllm" | "sglang";
  /** Called once per server at start (vLLM probes `/inference/v1/generate` here). */
  init(client: ServerClient): Promise<void>;
  /** The base model's name as the server knows it. */
  baseModel(client: ServerClient): Promise<string>;
  generate(client: ServerClient, request: TurnRequest): Promise<Generation>;
  /** Entry 0 NaN; entry t = log p(tokens[t] | tokens[<t]). */
  score(client: ServerClient, request: ScoreRequest): Promise<Float32Array>;
  loadAdapter(client: ServerClient, name: string, path: string): Promise<void>;
  unloadAdapter(client: ServerClient, name: string): Promise<void>;
}

/** The value vLLM writes for a log-prob of -inf (JSON has no infinity). */
export const CLAMPED_LOGPROB = -9999;

/** A log-prob from a server: clamped values (≤ -9999) become -Infinity, what they stand for. */
export function unclamp(value: number): number {
  return value <= CLAMPED_LOGPROB ? -Infinity : value;
}

/** A malformed server answer: names the server and the field. */
export function badAnswer(client: ServerClient, what: string, body: unknown): Error {
  const text = JSON.stringify(body) ?? String(body);
  return new Error(
    `inference server ${client.url}: unexpected answer (${what}): ${text.slice(0, 200)}; ` +
      "check that model.backend matches the server (vllm or sglang) and its version (docs/serving.md)",
  );
}

/** `"token_id:123"` → 123 (vLLM's `return_tokens_as_token_ids` strings); NaN otherwise. */
export function tokenIdOf(text: unknown): number {
  const m = typeof text === "string" ? /^token_id:(\d+)$/.exec(text) : null;
  return m ? Number(m[1]) : NaN;
}
