/**
 * Composites built only from primitive ops of the table, so autodiff needs no rule of their own:
 * SiLU, SwiGLU, RMSNorm, log-softmax, RoPE (rotate-half form), KV-head repetition, attention, and
 * `unbroadcast` for gradient rules.
 *
 * Dimension legend: B batch, T query length, S key length, H query heads, Hkv key/value heads,
 * D head dim, E any feature dim.
 */

import type { GraphBuilder, Value } from "./builder.ts";
import { noteGradRegion, type RegionGradContext } from "./grad_region.ts";
import { castTo } from "./grad_util.ts";
import { intsInput } from "./op_def.ts";
import { OPS } from "./ops.ts";

const { Add, Mul, Sigmoid, Sqrt, Sub, Neg, Concat, Split, Softmax, MatMul, Transpose } = OPS;
const { ReduceMean, ReduceLogSumExp, ReduceSum, Unsqueeze, Squeeze, Expand, Reshape, Shape, Reciprocal } =
  OPS;

/** `x * sigmoid(x)`. */
export function silu(g: GraphBuilder, x: Value): Value {
  return Mul.emit(g, x, Sigmoid.emit(g, x));
}

/** The SwiGLU MLP core: `silu(gate) * up`. */
export function swiglu(g: GraphBuilder, gate: Value, up: Value): Value {
  return Mul.emit(g, silu(g, gate), up);
}

/** RMSNorm over the last axis: `x / sqrt(mean(x²) + eps) * weight`. x [..., E], weight [E]. */
export function rmsNorm(g: GraphBuilder, x: Value, weight: Value, eps: number): Value {
  const meanSquare = ReduceMean.emit(g, Mul.emit(g, x, x), [-1]); // [..., 1]
  const inv = Reciprocal.emit(g, Sqrt.emit(g, Add.emit(g, meanSquare, eps))); // [..., 1]
  return Mul.emit(g, Mul.emit(g, x, inv), weight); // [..., E]
}

/** `x - logsumexp(x)` along `axis` (WebGPU has no LogSoftmax kernel; this runs everywhere). */
export function logSoftmax(g: GraphBuilder, x: Value, axis = -1): Value {
  return Sub.emit(g, x, ReduceLogSumExp.emit(g, x, [axis]));
}

/** `[-x2, x1]` where `x1, x2` are the two halves of the last axis (size `dim`). */
export function rotateHalf(g: GraphBuilder, x: Value, dim: number): Value {
  const [x1, x2] = Split.emit(g, x, [dim / 2, dim / 2], -1);
  return Concat.emit(g, [Neg.emit(g, x2), x1], -1);
}

/**
 * RoPE as in Hugging Face Llama/Qwen3: `x * cos + rotate_half(x) * sin`.
 * x [B, H, T, D]; cos, sin broadcastable to it (e.g. [B, 1, T, D], both halves repeated).
 */
export function rope(g: GraphBuilder, x: Value, cos: Value, sin: Value, dim: number): Value {
  return Add.emit(g, Mul.emit(g, x, cos), Mul.emit(g, rotateHalf(g, x, dim), sin)); // [B, H, T, D]
}

/** Repeats each of `Hkv` heads `rep` times: [B, Hkv, S, D] → [B, Hkv*rep, S, D] (as HF `repeat_kv`). */
export function repeatKv(g: GraphBuilder, x: Value, rep: number, headDim: number): Value {
  if (rep === 1) return x;
  const x5 = Unsqueeze.emit(g, x, [2]); // [B, Hkv, 1, S, D]
  const shape = Shape.emit(g, x5); // [5]
  const target = Mul.emit(g, shape, intsInput(g, [1, 1, rep, 1, 1])); // B, Hkv, rep, S, D
  const expanded = Expand.emit(g, x5, target); // [B, Hkv, rep, S, D]
  return reshapeHeads(g, expanded, headDim); // [B, H, S, D]
}

/** [B, Hkv, rep, S, D] → [B, Hkv*rep, S, D]. */
function reshapeHeads(g: GraphBuilder, x: Value, headDim: number): Value {
  const b = Shape.emit(g, x, 0, 1); // [1]
  const s = Shape.emit(g, x, 3, 4); // [1]
  const target = Concat.emit(g, [b, intsInput(g, [-1]), s, intsInput(g, [headDim])], 0); // [4]
  return Reshape.emit(g, x, target); // [B, H, S, D]
}

/** Options of `attention`. */
export interface AttentionOptions {
  /** Score scale, default `1/sqrt(D)`. */
  scale?: number;
  /** Additive mask or bias broadcastable to [B, H, T, S] (0 keep, large negative drop). */
  bias?: Value;
}

/**
 * Plain softmax attention: softmax(q kᵀ · scale + bias) v. q [B, H, T, D], k, v [B, H, S, D]. With
 * 16-bit inputs the scores are scaled, biased and normalized in float32 (a float32 bias such as a large
 * negative mask stays representable), and the weights cast back for the product with v.
 *
 * The span from the scores to the weights fed to v is one gradient region (grad_region.ts): with P those
 * weights, dP their gradient and O the output, the scores' gradient is `P · (dP − rowsum(dO · O))`
 * (`rowsum(dP · P)` over the S keys equals `rowsum(dO · O)` over the D dims, since dP = dO · vᵀ and
 * O = P · v), in P's dtype: four kernels, none of them a Cast, where the span's own rules make four over
 * `[T, S]` (the row sums' product) and, in float16, two Casts of `[T, S]` tensors more.
 */
export function attention(
  g: GraphBuilder,
  q: Value,
  k: Value,
  v: Value,
  headDim: number,
  o: AttentionOptions = {},
): Value {
  const kT = Transpose.emit(g, k, [0, 1, 3, 2]); // [B, H, D, S]
  const narrow = q.dtype === "float16" || q.dtype === "bfloat16" ? q.dtype : null; // float64 stays float64
  const qk = MatMul.emit(g, q, kT); // [B, H, T, S]
  const start = g.nodes.length;
  const wide = narrow ? OPS.Cast.emit(g, qk, "float32") : qk;
  const scale = o.scale ?? 1 / Math.sqrt(headDim);
  let scores = scale === 1 ? wide : Mul.emit(g, wide, scale); // a scale folded into q costs no kernel
  if (o.bias) scores = Add.emit(g, scores, o.bias); // [B, H, T, S]
  const softmax = Softmax.emit(g, scores, -1); // [B, H, T, S]
  const weights = narrow ? OPS.Cast.emit(g, softmax, narrow) : softmax; // [B, H, T, S]
  const span = g.nodes.slice(start);
  const out = MatMul.emit(g, weights, v); // [B, H, T, D]
  noteGradRegion(g, {
    nodes: span,
    inputs: o.bias ? [qk, o.bias] : [qk],
    outputs: [weights],
    grad: (ctx) => softmaxSpanGrad(ctx, { weights, out, scale, bias: o.bias }),
  });
  return out;
}

/** The scores' (and the bias's) gradient of attention's softmax span; see `attention`. */
function softmaxSpanGrad(
  ctx: RegionGradContext,
  span: { weights: Value; out: Value; scale: number; bias?: Value },
): (Value | null)[] {
  const { g, grads: [dP], wants } = ctx;
  const dO = ctx.gradOf(span.out); // [B, H, T, D]
  if (!dP || !dO) return [null, null];
  // the weights feed only `out`, so rowsum(dP · P) = rowsum(dO · O)
  const rowDot = ReduceSum.emit(g, Mul.emit(g, dO, span.out), [-1], { keepdims: true }); // [B, H, T, 1]
  const dScores = Mul.emit(g, span.weights, Sub.emit(g, dP, rowDot)); // [B, H, T, S]
  const dBias = span.bias && wants[1] ? unbroadcast(g, castTo(g, dScores, span.bias.dtype), span.bias) : null;
  return [wants[0] ? (span.scale === 1 ? dScores : Mul.emit(g, dScores, span.scale)) : null, dBias];
}

/**
 * Sums a gradient back to the shape of a broadcast operand: over the leading axes it lacks and
 * the axes where it has size 1. Needs `target`'s shape (rank and its literal 1s) to be tracked.
 */
export function unbroadcast(g: GraphBuilder, grad: Value, target: Value): Value {
  const to = target.shape;
  const from = grad.shape;
  if (!to || !from) throw new Error(`unbroadcast: shapes of ${grad.name} and ${target.name} must be tracked`);
  const lead = from.length - to.length;
  const axes: number[] = [];
  for (let i = 0; i < from.length; i++) {
    if (i < lead || (to[i - lead] === 1 && from[i] !== 1)) axes.push(i);
  }
  if (axes.length === 0) return grad;
  const summed = ReduceSum.emit(g, grad, axes, { keepdims: true }); // rank of grad
  if (lead === 0) return summed;
  return Squeeze.emit(g, summed, Array.from({ length: lead }, (_, i) => i)); // shape of target
}
