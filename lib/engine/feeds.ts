/**
 * Small feeds of the inference graph: token ids, lengths, sampling parameters, as host tensors (typed
 * arrays and shapes) that the engine's session wraps without copying.
 *
 * @module
 */

import type { HostTensor } from "../ort/value.ts";
import { IO } from "./infer_graph.ts";

/** How a generation samples. */
export interface SamplingParams {
  /** Softmax temperature; 0 = greedy (log-probs then at temperature 1). */
  temperature: number;
  /** Keep the k most likely tokens; 0 = off. */
  topK: number;
  /** Keep the smallest set of tokens with this much mass; 1 = off. */
  topP: number;
}

/** int64 `[rows, cols]` from numbers. */
export function int64(values: ArrayLike<number>, dims: readonly number[]): HostTensor<"int64"> {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i]);
  return { type: "int64", data, dims };
}

export function int32(values: ArrayLike<number>, dims: readonly number[]): HostTensor<"int32"> {
  return { type: "int32", data: Int32Array.from(values), dims };
}

export function float32(values: ArrayLike<number>, dims: readonly number[]): HostTensor<"float32"> {
  return { type: "float32", data: Float32Array.from(values), dims };
}

export function bool(value: boolean): HostTensor<"bool"> {
  return { type: "bool", data: Uint8Array.from([value ? 1 : 0]), dims: [] };
}

/** The sampling inputs for `batch` sequences drawing `uniforms`. */
export function samplingFeeds(
  params: SamplingParams,
  uniforms: ArrayLike<number>,
  vocab: number,
): Record<string, HostTensor> {
  const filtered = params.temperature > 0 && (params.topK > 0 || params.topP < 1);
  const k = params.topK > 0 ? Math.min(params.topK, vocab) : vocab;
  return {
    [IO.temperature]: float32([params.temperature], []),
    [IO.sample]: bool(params.temperature > 0),
    [IO.uniforms]: float32(uniforms, [uniforms.length]),
    [IO.filter]: bool(filtered),
    [IO.topK]: int64([k], [1]),
    [IO.topP]: float32([params.topP], []),
  };
}

/** One sequence's constraints at one decode step (constraints.ts builds them; head.ts applies them). */
export interface RowConstraints {
  /** Only the listed ids may be sampled (every other logit becomes −∞). */
  onlyListed: boolean;
  /** Distinct token ids. */
  ids: readonly number[];
  /** Bias on the raw logits (before temperature) per id; −Infinity bans it. */
  bias: readonly number[];
}

/**
 * The constraint inputs for `batch` rows (a missing or null row is unconstrained). `constrain` is false
 * when no row has constraints, so the graph leaves the logits untouched. Rows are padded to the widest
 * by repeating their first entry (the same write twice); an unconstrained row in a constrained batch
 * rewrites id 0 with its own value plus 0.
 */
export function constraintFeeds(
  rows: readonly (RowConstraints | null)[] | undefined,
  batch: number,
): Record<string, HostTensor> {
  const live = rows ?? [];
  const k = Math.max(1, ...live.map((r) => r?.ids.length ?? 0));
  const ids = new Array<number>(batch * k).fill(0);
  const bias = new Float32Array(batch * k);
  const fill = new Float32Array(batch);
  for (let b = 0; b < batch; b++) {
    const r = live[b];
    if (!r || r.ids.length === 0) continue;
    fill[b] = r.onlyListed ? -Infinity : 0;
    for (let j = 0; j < k; j++) {
      const from = j < r.ids.length ? j : 0;
      ids[b * k + j] = r.ids[from];
      bias[b * k + j] = r.bias[from];
    }
  }
  return {
    [IO.constrain]: bool(live.some((r) => r && r.ids.length > 0)),
    [IO.constraintFill]: { type: "float32", data: fill, dims: [batch] },
    [IO.constraintIds]: int64(ids, [batch, k]),
    [IO.constraintBias]: { type: "float32", data: bias, dims: [batch, k] },
  };
}

/** Checks sampling parameters, naming the bad one. */
export function checkSampling(params: SamplingParams): void {
  const bad = (name: string, value: number, range: string) =>
    new RangeError(`sampling: ${name} = ${value} is out of range; use ${range}`);
  if (!(params.temperature >= 0) || !Number.isFinite(params.temperature)) {
    throw bad("temperature", params.temperature, "0 (greedy) or a positive number");
  }
  if (!Number.isInteger(params.topK) || params.topK < 0) {
    throw bad("topK", params.topK, "0 (off) or a positive integer");
  }
  if (!(params.topP > 0 && params.topP <= 1)) throw bad("topP", params.topP, "a number in (0, 1]");
}
