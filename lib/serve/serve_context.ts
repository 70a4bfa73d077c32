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
import type { Metrics } from "./metrics.ts";
import type { Recorder } from "./gateway/recorder.ts";
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
  metrics: Metrics;
  /** `--record DIR`: records the chat turns of requests that name an episode (lib/serve/gateway/). */
  recorder?: Recorder;
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
      "BadRequestError",
      key,
    );
  }
  return v;
}
