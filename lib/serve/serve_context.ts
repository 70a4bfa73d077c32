/**
 * What every route of `deno task serve` shares: the policy, the tokenizer (when the model directory
 * has one), the limits, the loaded adapters and the gate that applies them one at a time.
 *
 * @module
 */

import type { Policy } from "../engine/policy.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { Adapter } from "../model/lora.ts";
import type { AdapterGate } from "./adapter_gate.ts";
import { HttpError } from "./limits.ts";

export interface ServeContext {
  policy: Policy;
  tokenizer: ChatTokenizer | null;
  /** Name of the base model in requests and /v1/models. */
  baseName: string;
  /** Most tokens of one request (prompt + completion). */
  maxModelLen: number;
  adapterRoot: string;
  /** Loaded adapters by name. */
  adapters: Map<string, { path: string; adapter: Adapter; created: number }>;
  gate: AdapterGate;
}

/** The adapter a request's `model` names (null: the base model); 404 for an unknown name. */
export function adapterOf(ctx: ServeContext, model: unknown): string | null {
  if (model === undefined || model === null || model === ctx.baseName) return null;
  if (typeof model === "string" && ctx.adapters.has(model)) return model;
  throw new HttpError(404, `The model \`${String(model)}\` does not exist.`, "NotFoundError");
}

/** A number field within [min, max], or its default; 400 otherwise. */
export function numberField(
  body: Record<string, unknown>,
  key: string,
  fallback: number,
  min: number,
  max: number,
  integer = false,
): number {
  const v = body[key];
  if (v === undefined || v === null) return fallback;
  if (
    typeof v !== "number" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))
  ) {
    throw new HttpError(
      400,
      `${key} = ${JSON.stringify(v)} is out of range; use ${
        integer ? "an integer" : "a number"
      } in [${min}, ${max}]`,
    );
  }
  return v;
}

/** Sampling fields shared by completions and chat: ours, plus vLLM's neutral values only. */
export function samplingFields(body: Record<string, unknown>) {
  const temperature = numberField(body, "temperature", 1, 0, 100);
  const topP = numberField(body, "top_p", 1, Number.MIN_VALUE, 1);
  const topK = numberField(body, "top_k", 0, -1, 1e9, true);
  const seed = numberField(body, "seed", Math.floor(Math.random() * 2 ** 31), 0, 2 ** 53, true);
  const neutral: [string, number][] = [["min_p", 0], ["repetition_penalty", 1], ["presence_penalty", 0], [
    "frequency_penalty",
    0,
  ], ["n", 1]];
  for (const [key, value] of neutral) {
    if (body[key] !== undefined && body[key] !== null && body[key] !== value) {
      throw new HttpError(
        400,
        `${key} = ${JSON.stringify(body[key])} is not supported by deno task serve; use ${value}`,
      );
    }
  }
  if (body.stream === true) {
    throw new HttpError(400, "stream is not supported by deno task serve; use stream: false");
  }
  return { temperature, topP, topK: topK < 0 ? 0 : topK, seed: seed >>> 0 };
}

/** `stop_token_ids`: a list of token ids (may be empty). */
export function stopTokenIds(body: Record<string, unknown>, vocab: number): number[] {
  const ids = body.stop_token_ids;
  if (ids === undefined || ids === null) return [];
  if (!Array.isArray(ids) || ids.some((t) => !Number.isInteger(t) || t < 0 || t >= vocab)) {
    throw new HttpError(400, `stop_token_ids must be token ids of this model (0..${vocab - 1})`);
  }
  return ids as number[];
}
