/**
 * The output head without a `[tokens, vocab]` tensor for the whole call.
 *
 * - `chunkedTargetLogprobs`: log p(target | prefix) for every row, computed `chunk` rows at a time
 *   inside an ONNX Loop, so only `[chunk, V]` logits exist at once.
 * - `sampleNext`: for one row per sequence, sample a token (or take the argmax) and return its log-prob.
 *
 * Log-probs are under softmax(logits / T). Temperature 0 means greedy decoding; its log-probs are
 * then reported at T = 1 (a temperature-0 distribution has no finite log-probs).
 *
 * Sampling is by inverse CDF with one uniform per sequence, fed from outside (seeded per sequence and
 * position in JS), so a seed reproduces a token whatever else is in the batch: the sampled token is the
 * first index whose cumulative probability reaches `u · total` (found in two stages, block then entry).
 * With top-k / top-p the candidates are the sorted top k (k = V for top-p alone; a full sort, slow),
 * cut where the probability mass before a token reaches top_p; the reported log-prob stays that of the
 * full softmax(logits / T) (as the policy-gradient ratio needs), not of the truncated distribution.
 *
 * Two optional pieces serve `deno task serve` (docs/serving.md) and leave everything else bit-identical:
 *
 * - Constraints (`constrainLogits`): a per-sequence fill added to every logit (−∞: only listed ids may
 *   be sampled) and a sparse bias `[B, K]` written onto the listed ids, scaled by 1/T because vLLM adds
 *   its logit bias, min-token and bad-word masks and penalties to the raw logits, before temperature.
 *   Behind an If on one bool: switched off, the logits pass through an Identity, unchanged. The sampled
 *   token and its reported log-prob then come from the constrained distribution.
 * - Alternatives (`topAlternatives`, `chunkedTopLogprobs`): the n most likely tokens of a sampled row, or
 *   of every scored row, with their log-probs, behind an If on n > 0.
 *
 * Dimension legend: N rows (tokens), B sequences, H hidden, V vocab, C chunk rows, K candidates,
 * n alternatives.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../../onnx/builder.ts";
import { logSoftmax as composedLogSoftmax } from "../../onnx/compose.ts";
import type { ExecutionProvider } from "../../ort/providers.ts";
import { OPS } from "../../onnx/ops.ts";

const { Add, ArgMax, Cast, Concat, ConstantOfShape, CumSum, Div, Expand, Gather, GatherElements, Gemm } = OPS;
const { Greater, Identity, If, Less, Log, Loop, Min, Mul, ReduceSum, Reshape, ScatterElements, Shape } = OPS;
const { Slice, Softmax, Squeeze, Sub, TopK, Unsqueeze, Where } = OPS;

/** A log-softmax over the last axis. */
export type LogSoftmaxFn = (g: GraphBuilder, z: Value) => Value;

/**
 * The log-softmax for an execution provider: onnxruntime's fused LogSoftmax (one pass) on CPU and CUDA,
 * `x - ReduceLogSumExp(x)` on WebGPU, which has no LogSoftmax kernel (docs/ENGINE_FACTS.md).
 */
export function logSoftmaxFor(ep: ExecutionProvider | undefined): LogSoftmaxFn {
  return ep === "webgpu" ? (g, z) => composedLogSoftmax(g, z) : (g, z) => OPS.LogSoftmax.emit(g, z, -1);
}

/** Rows of logits computed at once by `chunkedTargetLogprobs`: about 16M floats (64 MB) per chunk. */
export function headChunkRows(vocab: number): number {
  return Math.max(16, Math.min(1024, Math.floor((16 << 20) / vocab)));
}

/** `1 / T`, with T = 0 (greedy) read as 1. `temperature` is a float scalar. */
export function inverseTemperature(g: GraphBuilder, temperature: Value): Value {
  const t = Where.emit(g, Greater.emit(g, temperature, 0), temperature, 1); // []
  return Div.emit(g, 1, t); // []
}

/**
 * log softmax(h Wᵀ · invT)[target] per row: h `[N, H]`, targets int64 `[N]`, W `[V, H]` → `[N]`.
 * A Loop over `ceil(N / chunk)` chunks; the result grows by concatenation (N floats, cheap), because
 * Loop scan outputs must have the same shape every iteration and the last chunk may be shorter.
 * `chunk` null: one pass over all rows, for a provider without a Loop kernel (graph/forms.ts).
 */
export function chunkedTargetLogprobs(
  g: GraphBuilder,
  h: Value,
  targets: Value,
  w: Value,
  invT: Value,
  chunk: number | null,
  logSoftmax: LogSoftmaxFn,
): Value {
  const rowLogprobs = (b: GraphBuilder, hc: Value, tc: Value) => {
    const z = Gemm.emit(b, Mul.emit(b, hc, invT), w, null, { transB: true }); // [C, V]
    return Squeeze.emit(b, GatherElements.emit(b, logSoftmax(b, z), Unsqueeze.emit(b, tc, [1]), 1), [1]); // [C]
  };
  if (chunk === null) return rowLogprobs(g, h, targets); // [N]
  const n = Gather.emit(g, Shape.emit(g, h), g.scalar(0, "int64"), 0); // []
  const trips = Div.emit(g, Add.emit(g, n, chunk - 1), chunk); // []
  const empty = g.constant(new Float32Array(0), [0]); // [0]
  const { carried } = Loop.emit(g, {
    name: "head_chunks",
    trips,
    carried: [empty],
    body: (b, iter, _cond, [acc]) => {
      const start = Unsqueeze.emit(b, Mul.emit(b, iter, chunk), [0]); // [1]
      const end = Min.emit(b, Add.emit(b, start, chunk), Unsqueeze.emit(b, n, [0])); // [1]
      const lp = rowLogprobs(b, Slice.emit(b, h, start, end, [0]), Slice.emit(b, targets, start, end, [0])); // [C]
      return { carried: [Concat.emit(b, [acc, lp], 0)] }; // [rows so far]
    },
  });
  return carried[0]; // [N]
}

/** Sampling inputs of `sampleNext`. */
export interface SamplerInputs {
  /** float scalar: temperature (0 = greedy). */
  temperature: Value;
  /**
   * bool scalar: temperature > 0, given from the host. Absent, the graph compares the temperature itself;
   * on a GPU provider that comparison runs on the device and the If that reads it waits for a copy back.
   */
  sample?: Value;
  /** float `[B]`: one uniform in (0, 1) per sequence. */
  uniforms: Value;
  /** bool scalar: use the top-k / top-p path. */
  filter: Value;
  /** int64 `[1]`: candidates kept by top-k (V when only top-p is on). */
  topK: Value;
  /** float scalar: nucleus mass (1 = off). */
  topP: Value;
}

/** Per-sequence constraints on the sampled row (see the module comment). */
export interface ConstraintInputs {
  /** bool scalar: apply them; false passes the logits through unchanged. */
  enabled: Value;
  /** float `[B]`: added to every logit of the row (−∞ when only the listed ids may be sampled, else 0). */
  fill: Value;
  /** int64 `[B, K]`: ids whose logit becomes its own value plus the bias (padding repeats an entry). */
  ids: Value;
  /** float `[B, K]`: bias on the raw logits (before temperature); −∞ bans the id. */
  bias: Value;
}

/** Extra pieces of `sampleNext`. */
export interface SamplerExtras {
  constraints?: ConstraintInputs;
  /** int64 `[1]`: alternatives to return per row (0: none). */
  topN?: Value;
}

/**
 * Constrained logits `z / T`: `[B, V]` → `[B, V]`. Every entry gets the row's fill, then each listed id
 * is set to its unconstrained value plus `bias / T` (ScatterElements; JS merges duplicate ids first).
 */
export function constrainLogits(g: GraphBuilder, z: Value, invT: Value, c: ConstraintInputs): Value {
  const [out] = If.emit(
    g,
    c.enabled,
    (b) => {
      const filled = Add.emit(b, z, Unsqueeze.emit(b, c.fill, [1])); // [B, V]
      const kept = Add.emit(b, GatherElements.emit(b, z, c.ids, 1), Mul.emit(b, c.bias, invT)); // [B, K]
      return [ScatterElements.emit(b, filled, c.ids, kept, { axis: 1 })]; // [B, V]
    },
    (b) => [Identity.emit(b, z)],
    "constrain",
  );
  return out;
}

/** The `n` most likely entries of probabilities p `[B, V]`: `[ids int64 [B, n], log-probs [B, n]]`. */
export function topAlternatives(g: GraphBuilder, p: Value, n: Value): [Value, Value] {
  const [ids, logprobs] = If.emit(
    g,
    Greater.emit(g, n, 0),
    (b) => {
      const [values, indices] = TopK.emit(b, p, n, { axis: 1 }); // [B, n], most likely first
      return [indices, Log.emit(b, values)]; // Log of p, as the sampled token's log-prob is computed
    },
    (b) => {
      const shape = Concat.emit(b, [Shape.emit(b, p, 0, 1), b.ints([0])], 0); // [2] = B, 0
      return [ConstantOfShape.emit(b, shape, 0, "int64"), ConstantOfShape.emit(b, shape, 0, "float32")];
    },
    "alternatives",
  );
  return [ids, logprobs];
}

/**
 * The `n` most likely tokens after every row (under softmax(h Wᵀ · invT)), in chunks as
 * `chunkedTargetLogprobs` (`chunk` null: one pass): h `[N, H]` → `[ids int64 [N, n], log-probs [N, n]]`.
 * Its own pass over the head, run only when asked (scoring a prompt with alternatives), so plain scoring
 * is unchanged.
 */
export function chunkedTopLogprobs(
  g: GraphBuilder,
  h: Value,
  w: Value,
  invT: Value,
  chunk: number | null,
  logSoftmax: LogSoftmaxFn,
  n: Value,
): [Value, Value] {
  const rowTop = (b: GraphBuilder, hc: Value) => {
    const z = Gemm.emit(b, Mul.emit(b, hc, invT), w, null, { transB: true }); // [C, V]
    const [values, indices] = TopK.emit(b, logSoftmax(b, z), n, { axis: 1 }); // [C, n]
    return [indices, values];
  };
  if (chunk === null) {
    const [ids, lps] = rowTop(g, h);
    return [ids, lps]; // [N, n], [N, n]
  }
  const rows = Gather.emit(g, Shape.emit(g, h), g.scalar(0, "int64"), 0); // []
  const trips = Div.emit(g, Add.emit(g, rows, chunk - 1), chunk); // []
  const empty = Concat.emit(g, [g.ints([0]), n], 0); // [2] = 0, n
  const { carried } = Loop.emit(g, {
    name: "top_chunks",
    trips,
    carried: [ConstantOfShape.emit(g, empty, 0, "int64"), ConstantOfShape.emit(g, empty, 0, "float32")],
    body: (b, iter, _cond, [accIds, accLps]) => {
      const start = Unsqueeze.emit(b, Mul.emit(b, iter, chunk), [0]); // [1]
      const end = Min.emit(b, Add.emit(b, start, chunk), Unsqueeze.emit(b, rows, [0])); // [1]
      const [indices, values] = rowTop(b, Slice.emit(b, h, start, end, [0])); // [C, n]
      return { carried: [Concat.emit(b, [accIds, indices], 0), Concat.emit(b, [accLps, values], 0)] };
    },
  });
  return [carried[0], carried[1]]; // [N, n], [N, n]
}

/** Vocabulary entries per block of the two-stage sampler. */
const BLOCK = 128;

/**
 * Next token and its log-prob for rows `[B, H]` under head W `[V, H]`: `[tokens int64 [B], logprobs [B]]`,
 * then, with `extras.topN`, the alternatives `[ids [B, n], log-probs [B, n]]`.
 * One exponential pass over the vocabulary (Softmax); the log-prob is `log p[token]`, exact for any
 * token that can be sampled (p above float32's denormal range; a greedy token has p ≥ 1/V).
 */
export function sampleNext(
  g: GraphBuilder,
  rows: Value,
  w: Value,
  vocab: number,
  s: SamplerInputs,
  extras: SamplerExtras = {},
): Value[] {
  const invT = inverseTemperature(g, s.temperature);
  const scaled = Mul.emit(g, rows, invT); // [B, H]: 1/T folded in before the head
  const raw = Gemm.emit(g, scaled, w, null, { transB: true }); // [B, V]
  const z = extras.constraints ? constrainLogits(g, raw, invT, extras.constraints) : raw; // [B, V]
  const p = Softmax.emit(g, z, 1); // [B, V]
  const u = Unsqueeze.emit(g, s.uniforms, [1]); // [B, 1]
  const [token] = If.emit(
    g,
    s.sample ?? Greater.emit(g, s.temperature, 0),
    (b) =>
      If.emit(
        b,
        s.filter,
        (f) => [sampleFiltered(f, z, p, u, s)],
        (f) => [sampleTwoStage(f, p, u, vocab)],
        "filter",
      ),
    (b) => [ArgMax.emit(b, z, 1)],
    "sample",
  ); // [B, 1]
  const logprob = Log.emit(g, GatherElements.emit(g, p, token, 1)); // [B, 1]
  const out = [Squeeze.emit(g, token, [1]), Squeeze.emit(g, logprob, [1])];
  return extras.topN ? [...out, ...topAlternatives(g, p, extras.topN)] : out;
}

/**
 * `sampleNext` without control flow, for a graph run under graph capture (which refuses If nodes):
 * rows `[B, H]` → `[tokens int64 [B], logprobs [B]]`. The same ops as sampleNext's unfiltered path — the
 * two-stage sample where temperature > 0, the argmax where it is 0 — both computed and one kept by a
 * Where on the device, so it gives sampleNext's tokens and log-probs; no top-k / top-p, constraints or
 * alternatives (their callers run on the main graph: lib/engine/decode_session.ts).
 */
export function sampleUnbranched(
  g: GraphBuilder,
  rows: Value,
  w: Value,
  vocab: number,
  temperatures: Value,
  uniforms: Value,
): [Value, Value] {
  // Per-row temperatures `[B]`, not one scalar: onnxruntime places scalar arithmetic on the CPU, which
  // would copy to the host inside the run.
  const t = Unsqueeze.emit(g, temperatures, [1]); // [B, 1]
  const scaled = Mul.emit(g, rows, inverseTemperature(g, t)); // [B, H]
  const z = Gemm.emit(g, scaled, w, null, { transB: true }); // [B, V]
  const p = Softmax.emit(g, z, 1); // [B, V]
  const sampled = sampleTwoStage(g, p, Unsqueeze.emit(g, uniforms, [1]), vocab); // [B, 1]
  // Chosen in float32 (exact ids below 2^24): WebGPU has no int64 Where, and a node on the CPU is a copy
  // inside the run. Each output is written by a kernel (a one-entry ReduceSum, then a Cast), not a
  // Reshape or Squeeze: those copy into a bound output, and a captured graph replays dispatches only.
  const asFloat = (x: Value) => Cast.emit(g, x, "float32");
  const chosen = Where.emit(g, Greater.emit(g, t, 0), asFloat(sampled), asFloat(ArgMax.emit(g, z, 1))); // [B, 1]
  const logprob = Log.emit(g, GatherElements.emit(g, p, toIndex(g, chosen), 1)); // [B, 1]
  const squeezed = (x: Value) => ReduceSum.emit(g, x, [1], { keepdims: false }); // [B, 1] → [B]
  return [toIndex(g, squeezed(chosen)), squeezed(logprob)]; // [B], [B]
}

/**
 * Inverse CDF within rows: p `[B, K]`, uniforms u `[B, 1]` → `[index, threshold]`, both `[B, 1]`: the index
 * of the first entry whose running sum reaches threshold = u · the row's total, as a float32 count (exact
 * below 2^24). Counting in float keeps every step on a GPU provider, which has no int64 ReduceSum or Min:
 * an int64 count would send `[B, K]` to the host and back inside each decode step (docs/ENGINE_FACTS.md,
 * "The GPU path"). Indices become int64 only where a gather reads them.
 *
 * The total is the running sum's last entry, not a ReduceSum of p: onnxruntime's CPU ReduceSum over rows
 * whose length is not a multiple of 8 rounds differently by the row's place in the batch (measured: rows of
 * 1,187 block masses, the two-stage sampler's at Qwen3's vocabulary, differed in 123 of 200 random rows
 * between row 0 of a batch of 1 and row 1 of a batch of 2; CumSum and Softmax in none), so a threshold
 * that moved in its last bit flipped a sampled token when a sequence decoded in another slot
 * (tests/engine/scheduler_test.ts, staggered sequences). CumSum adds along each row in order, wherever the
 * row sits, and the count of entries below the threshold is a sum of ones, exact in any order.
 */
function inverseCdf(g: GraphBuilder, p: Value, u: Value, size: number | Value): [Value, Value] {
  const cdf = CumSum.emit(g, p, 1); // [B, K]
  const threshold = Mul.emit(g, u, Slice.emit(g, cdf, [-1], [Number.MAX_SAFE_INTEGER], [1])); // [B, 1]
  return [firstReaching(g, cdf, threshold, size), threshold];
}

/** Index of the first running sum (cdf `[B, K]`) that reaches `threshold` `[B, 1]`: `[B, 1]` float32. */
function firstReaching(g: GraphBuilder, cdf: Value, threshold: Value, size: number | Value): Value {
  const below = ReduceSum.emit(g, Cast.emit(g, Less.emit(g, cdf, threshold), "float32"), [1]); // [B, 1]
  const last = typeof size === "number" ? g.scalar(size - 1) : Sub.emit(g, size, 1); // [] or [1]
  return Min.emit(g, below, last); // [B, 1]: rounding can put the threshold past the last sum
}

/** A float32 index (or indices) as the int64 a gather reads. */
function toIndex(g: GraphBuilder, x: Value): Value {
  return Cast.emit(g, x, "int64");
}

/**
 * Inverse-CDF sampling in two stages, so that no running sum spans the whole vocabulary (CumSum is
 * slow and serial): pick a block of BLOCK entries by its mass, then an entry inside the block by the
 * mass left over. Same distribution as one inverse CDF over p, same token for the same uniform.
 */
function sampleTwoStage(g: GraphBuilder, p: Value, u: Value, vocab: number): Value {
  const blocks = Math.ceil(vocab / BLOCK);
  const padded = blocks * BLOCK === vocab ? p : padColumns(g, p, blocks * BLOCK - vocab); // [B, nb*BLOCK]
  const p3 = Reshape.emit(g, padded, [0, blocks, BLOCK]); // [B, nb, BLOCK]
  const mass = ReduceSum.emit(g, p3, [2], { keepdims: false }); // [B, nb]: rows of 128, a multiple of 8
  const [j, threshold] = inverseCdf(g, mass, u, blocks); // [B, 1] float, [B, 1]
  const before = CumSum.emit(g, mass, 1, { exclusive: true }); // [B, nb]
  const rest = Sub.emit(g, threshold, GatherElements.emit(g, before, toIndex(g, j), 1)); // [B, 1]
  const at = toIndex(g, Expand.emit(g, Unsqueeze.emit(g, j, [2]), [1, 1, BLOCK])); // [B, 1, BLOCK]
  const inBlock = Squeeze.emit(g, GatherElements.emit(g, p3, at, 1), [1]); // [B, BLOCK]
  const k = firstReaching(g, CumSum.emit(g, inBlock, 1), rest, BLOCK); // [B, 1] float
  return toIndex(g, Min.emit(g, Add.emit(g, Mul.emit(g, j, BLOCK), k), g.scalar(vocab - 1))); // [B, 1]
}

/** `[B, n]` → `[B, n + extra]` with zero columns appended. */
function padColumns(g: GraphBuilder, x: Value, extra: number): Value {
  const rows = Shape.emit(g, x, 0, 1); // [1]
  const zeros = ConstantOfShape.emit(g, Concat.emit(g, [rows, g.ints([extra])], 0), 0, "float32"); // [B, extra]
  return Concat.emit(g, [x, zeros], 1);
}

/** Top-k then top-p candidates, sampled by inverse CDF, mapped back to vocabulary ids. */
function sampleFiltered(g: GraphBuilder, z: Value, p: Value, u: Value, s: SamplerInputs): Value {
  const [, indices] = TopK.emit(g, z, s.topK, { axis: 1 }); // [B, K], most likely first
  const sorted = GatherElements.emit(g, p, indices, 1); // [B, K]
  const before = CumSum.emit(g, sorted, 1, { exclusive: true }); // [B, K]: mass of better tokens
  const kept = Mul.emit(g, sorted, Cast.emit(g, Less.emit(g, before, s.topP), "float32")); // [B, K]; the first stays
  const size = Cast.emit(g, Gather.emit(g, Shape.emit(g, kept), g.ints([1]), 0), "float32"); // [1]
  const [j] = inverseCdf(g, kept, u, size); // [B, 1] float
  return GatherElements.emit(g, indices, toIndex(g, j), 1); // [B, 1]
}
