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
    [IO.uniforms]: float32(uniforms, [uniforms.length]),
    [IO.filter]: bool(filtered),
    [IO.topK]: int64([k], [1]),
    [IO.topP]: float32([params.topP], []),
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
