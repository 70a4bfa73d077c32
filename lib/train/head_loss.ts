/**
 * The head and the per-token objective, fused per chunk of rows so that no `[tokens, vocab]` tensor
 * exists: a documented exception to "autodiff over everything" (docs/STYLE.md 3), with its own tests.
 *
 * For each chunk of C rows (an ONNX Loop; C divides N, so every iteration has the same shape):
 *   z    = (h · invT) Wᵀ                     [C, V]   logits at the sampling temperature
 *   ls   = log_softmax(z)                    [C, V]
 *   lp   = ls[target]                        [C]      current policy log-probs
 *   l    = objective(lp, inputs…)            [C]      (objective.ts: its declared per-token inputs)
 *   L_c  = Σ weight · l                      []
 *   g    = dL_c / dlp                        [C]      by autodiff over the objective's ops
 *   dh   = invT · (g ⊙ W[target] − (g ⊙ softmax(z)) W)   [C, H]
 * `dh` is the gradient that flows into the decoder (the train graph seeds its backward walk with it).
 * The logits are computed once per row for forward and backward together; entropy comes from the
 * same softmax.
 *
 * Dimension legend: N rows, C rows per chunk, K = N / C chunks, H hidden, V vocab.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../onnx/builder.ts";
import { backward } from "../onnx/autodiff.ts";
import { OPS } from "../onnx/ops.ts";
import type { Objective, TokenInputs } from "../losses/objective.ts";
import { shaped } from "./attention.ts";
import type { LogSoftmaxFn } from "../model/graph/head.ts";

const { Add, Div, Exp, Gather, GatherElements, Gemm, Greater, Loop, Mul, Neg, ReduceSum, Reshape, Shape } =
  OPS;
const { Slice, Squeeze, Sub, Unsqueeze, Where } = OPS;

/** Per-row inputs of the head, each `[N]`, and the run's scalars. */
export interface HeadLossInputs {
  hidden: Value; // [N, H] after the final norm
  targets: Value; // int64 [N]: the token each row predicts
  weights: Value; // [N]: aggregation weight (0 off the loss mask)
  /** The objective's declared per-token inputs by name, each `[N]`, in graph-input order. */
  inputs: Readonly<Record<string, Value>>;
  invT: Value; // []
  /** The loss's declared scalars by key, each `[]`. */
  scalars: Readonly<Record<string, Value>>;
  chunk: Value; // int64 []: rows per chunk, divides N
}

/** What the head returns: per-row values `[N]`, the loss `[]`, and dLoss/dhidden `[N, H]`. */
export interface HeadLossOutputs {
  logprobs: Value;
  pg: Value;
  kl: Value;
  clipped: Value;
  entropy: Value;
  loss: Value;
  dHidden: Value;
}

/** How the head is written for a provider (lib/model/graph/forms.ts). */
export interface HeadLossForms {
  /** In chunks inside a Loop (default); false: one pass over all rows (no Loop kernel; `chunk` unused). */
  chunked?: boolean;
  /** How autodiff adds gradient contributions (default one Sum node). */
  gradientSum?: "Sum" | "Add";
}

/** The fused chunked head (see the module doc); `w` is the head matrix `[V, H]`. */
export function fusedHeadLoss(
  g: GraphBuilder,
  x: HeadLossInputs,
  w: Value,
  hiddenSize: number,
  objective: Objective,
  logSoftmax: LogSoftmaxFn,
  forms: HeadLossForms = {},
): HeadLossOutputs {
  if (forms.chunked === false) return unchunkedHeadLoss(g, x, w, hiddenSize, objective, logSoftmax, forms);
  const scans = overChunks(g, x.chunk, x.hidden, "head_loss", (b, chunkOf) => {
    const hidden = chunkOf(x.hidden, ["C", hiddenSize]); // [C, H]
    const rows = (v: Value) => chunkOf(v, ["C"]); // [C]
    const targets = rows(x.targets);
    const weights = rows(x.weights);
    const inputs = Object.fromEntries(Object.entries(x.inputs).map(([name, v]) => [name, rows(v)]));
    const out = chunkStep(b, { ...x, hidden, targets }, { weights, inputs }, w, objective, logSoftmax, forms);
    return [out.logprobs, out.pg, out.kl, out.clipped, out.entropy, out.loss, out.dHidden];
  });
  const flat = (v: Value) => shaped(Reshape.emit(g, v, [-1]), ["N"]); // [K, C] → [N]
  return {
    logprobs: flat(scans[0]),
    pg: flat(scans[1]),
    kl: flat(scans[2]),
    clipped: flat(scans[3]),
    entropy: flat(scans[4]),
    loss: ReduceSum.emit(g, scans[5], [0], { keepdims: false }), // []
    dHidden: shaped(Reshape.emit(g, scans[6], [-1, hiddenSize]), ["N", hiddenSize]), // [N, H]
  };
}

/** The same computation as one chunk holding every row (no Loop; see `HeadLossForms.chunked`). */
function unchunkedHeadLoss(
  g: GraphBuilder,
  x: HeadLossInputs,
  w: Value,
  hiddenSize: number,
  objective: Objective,
  logSoftmax: LogSoftmaxFn,
  forms: HeadLossForms,
): HeadLossOutputs {
  const all = (v: Value) => shaped(v, ["C"]); // one chunk of every row: the symbol chunkStep uses
  const rows = {
    weights: all(x.weights),
    inputs: Object.fromEntries(Object.entries(x.inputs).map(([name, v]) => [name, all(v)])),
  };
  const out = chunkStep(g, { ...x, targets: all(x.targets) }, rows, w, objective, logSoftmax, forms);
  return {
    logprobs: out.logprobs,
    pg: out.pg,
    kl: out.kl,
    clipped: out.clipped,
    entropy: out.entropy,
    loss: out.loss,
    dHidden: shaped(out.dHidden, ["N", hiddenSize]),
  };
}

/** A chunk's log-softmax `[C, V]` at the temperature and its rows' log-probs of their targets `[C]`. */
function rowLogprobs(
  b: GraphBuilder,
  x: Pick<HeadLossInputs, "hidden" | "targets" | "invT">,
  w: Value,
  logSoftmax: LogSoftmaxFn,
) {
  const z = Gemm.emit(b, Mul.emit(b, x.hidden, x.invT), w, null, { transB: true }); // [C, V]
  const ls = logSoftmax(b, z); // [C, V]
  const target = Unsqueeze.emit(b, x.targets, [1]); // [C, 1]
  const logprobs = shaped(Squeeze.emit(b, GatherElements.emit(b, ls, target, 1), [1]), ["C"]); // [C]
  return { ls, logprobs };
}

/**
 * The log-probs of the head's rows alone `[N]`, in the same chunks and by the same ops as `fusedHeadLoss`'s
 * (so the same floats): for a graph that computes no gradient (the trainer's forward alone). A Loop's body
 * is one node to onnxruntime, which runs all of it for any output read, so the forward cannot be cut from
 * the fused head's Loop as from the rest of the graph.
 */
export function chunkedHeadLogprobs(
  g: GraphBuilder,
  x: Pick<HeadLossInputs, "hidden" | "targets" | "invT" | "chunk">,
  w: Value,
  hiddenSize: number,
  logSoftmax: LogSoftmaxFn,
): Value {
  const scans = overChunks(g, x.chunk, x.hidden, "head_logprobs", (b, chunkOf) => {
    const hidden = chunkOf(x.hidden, ["C", hiddenSize]); // [C, H]
    const targets = chunkOf(x.targets, ["C"]); // [C]
    return [rowLogprobs(b, { ...x, hidden, targets }, w, logSoftmax).logprobs];
  });
  return shaped(Reshape.emit(g, scans[0], [-1]), ["N"]); // [K, C] → [N]
}

/**
 * A Loop over the N rows of `rows` in chunks of `chunk` (which divides N): `body` gets the body's builder
 * and `chunkOf`, which slices the chunk's rows of an `[N, …]` value (typed `dims`), and returns the
 * chunk's values, which the Loop stacks (`[K, …]`).
 */
function overChunks(
  g: GraphBuilder,
  chunk: Value,
  rows: Value,
  name: string,
  body: (b: GraphBuilder, chunkOf: (v: Value, dims: (string | number)[]) => Value) => Value[],
): Value[] {
  const n = Gather.emit(g, Shape.emit(g, rows), g.scalar(0, "int64"), 0); // []
  const { scans } = Loop.emit(g, {
    name,
    trips: Div.emit(g, n, chunk),
    carried: [],
    body: (b, iter) => {
      const start = Unsqueeze.emit(b, Mul.emit(b, iter, chunk), [0]); // [1]
      const end = Add.emit(b, start, Unsqueeze.emit(b, chunk, [0])); // [1]
      const chunkOf = (v: Value, dims: (string | number)[]) =>
        shaped(Slice.emit(b, v, start, end, [0]), dims);
      return { carried: [], scans: body(b, chunkOf) };
    },
  });
  return scans;
}

/**
 * The log-probs the objective reads: `lp` on weighted rows, 0 on the rest. The rows of weight 0 are the
 * padding that rounds the head's rows up (lib/train/batch.ts): their inputs are 0 and they predict token 0,
 * whose log-prob at a low temperature can lie below -88.7, where an objective's `exp(ref - lp)` overflows
 * float32; weight 0 times infinity is NaN, in the loss and through autodiff in every gradient. With lp 0
 * there every term is finite, and the weighted rows' values and gradients are as they were.
 */
function weightedOnly(b: GraphBuilder, lp: Value, weights: Value): Value {
  return Where.emit(b, Greater.emit(b, weights, 0), lp, b.scalar(0)); // [C]
}

interface ChunkRows {
  weights: Value;
  inputs: Readonly<Record<string, Value>>;
}

function chunkStep(
  b: GraphBuilder,
  x: HeadLossInputs,
  rows: ChunkRows,
  w: Value,
  objective: Objective,
  logSoftmax: LogSoftmaxFn,
  forms: HeadLossForms,
) {
  const { ls, logprobs } = rowLogprobs(b, x, w, logSoftmax);
  const inputs: TokenInputs = {
    inputs: rows.inputs,
    logprobs: weightedOnly(b, logprobs, rows.weights),
    scalars: x.scalars,
  };
  const parts = objective(b, inputs);
  const loss = ReduceSum.emit(b, Mul.emit(b, rows.weights, parts.loss), [0], { keepdims: false }); // []
  const [dlp] = backward(b, [{ value: loss, grad: b.scalar(1) }], [logprobs], { sum: forms.gradientSum }); // [C]
  const p = Exp.emit(b, ls); // [C, V]
  const entropy = Neg.emit(b, ReduceSum.emit(b, Mul.emit(b, p, ls), [1], { keepdims: false })); // [C]
  const gcol = Unsqueeze.emit(b, dlp!, [1]); // [C, 1]
  const toTarget = Mul.emit(b, gcol, Gather.emit(b, w, x.targets, 0)); // [C, H]
  const toAll = Gemm.emit(b, Mul.emit(b, gcol, p), w); // [C, V] · [V, H] = [C, H]
  const dHidden = Mul.emit(b, Sub.emit(b, toTarget, toAll), x.invT); // [C, H]
  return { ...parts, logprobs, entropy, loss, dHidden };
}
