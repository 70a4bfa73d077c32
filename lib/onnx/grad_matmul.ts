/**
 * Gradient rules of MatMul and Gemm (the MatMul rule is long enough to live beside `ops_math.ts`
 * rather than inside it).
 *
 * For `y = a @ b`: `da = dy @ bᵀ`, `db = aᵀ @ dy`, each summed back over broadcast batch dims. The
 * common cases avoid copies: a weight `b` [K, N] is never transposed (`Gemm(dy, b, transB)` reads it
 * as stored, which matters for frozen weights), `db` flattens the batch into one `Gemm(aᵀ, dy)`, and
 * an operand that is itself a last-two-axes Transpose is read through.
 */

import type { GraphBuilder, NodeRecord, Value } from "./builder.ts";
import {
  floatAttr,
  gradError,
  gradOps,
  intAttr,
  outGrad,
  shapeValue,
  sumToShape,
  transposedFrom,
} from "./grad_util.ts";
import type { GradContext } from "./op_def.ts";
import type { Dim } from "./proto.ts";
import { matmulShape, sameShape, type Shape } from "./shape.ts";

/** MatMul: numpy semantics, 1-D operands included (treated as a row / a column). */
export function matmulGrad(ctx: GradContext): (Value | null)[] {
  const { g, node, wants } = ctx;
  const [a, b] = node.inputs as Value[];
  const ra = a.shape?.length;
  const rb = b.shape?.length;
  if (ra === undefined || rb === undefined) {
    throw gradError(node, `the rank of ${ra === undefined ? a.name : b.name} is not tracked`, "give it dims");
  }
  const dy = outGrad(ctx);
  if (ra >= 2 && rb >= 2) return matrixGrads(g, node, a, b, dy, node.outputs[0].shape, wants);
  // A vector is a [1, K] row (a) or a [K, 1] column (b); the output gets the matching unit axes.
  const o = gradOps(g);
  const a2 = ra === 1 ? o.Unsqueeze(a, [0]) : a; // [1, K] or a
  const b2 = rb === 1 ? o.Unsqueeze(b, [1]) : b; // [K, 1] or b
  const unit = ra === 1 && rb === 1 ? [0, 1] : ra === 1 ? [-2] : [-1];
  const dy2 = o.Unsqueeze(dy, unit); // [..., M, N]
  const [da, db] = matrixGrads(g, node, a2, b2, dy2, matmulShape(a2.shape, b2.shape), wants);
  return [da && (ra === 1 ? o.Squeeze(da, [0]) : da), db && (rb === 1 ? o.Squeeze(db, [1]) : db)];
}

/** Gradients of `a [..., M, K] @ b [..., K, N]` (both at least 2-D) with output shape `y`. */
function matrixGrads(
  g: GraphBuilder,
  node: NodeRecord,
  a: Value,
  b: Value,
  dy: Value,
  y: Shape,
  wants: readonly boolean[],
): [Value | null, Value | null] {
  const o = gradOps(g);
  const ra = a.shape!.length;
  if (b.shape!.length === 2) {
    if (ra === 2) {
      return [
        wants[0] ? o.Gemm(dy, b, null, { transB: true }) : null, // [M, K]
        wants[1] ? o.Gemm(a, dy, null, { transA: true }) : null, // [K, N]
      ];
    }
    // A linear layer: rows = all leading dims of a; the weight is read as stored.
    return [
      wants[0] ? o.Reshape(o.Gemm(flatten(g, dy), b, null, { transB: true }), shapeValue(g, a)) : null, // a's shape
      wants[1] ? o.Gemm(flatten(g, a), flatten(g, dy), null, { transA: true }) : null, // [K, N]
    ];
  }
  const batch = y?.slice(0, -2);
  const fromA: Dim[] | undefined = batch && [...batch, ...a.shape!.slice(-2)];
  const fromB: Dim[] | undefined = batch && [...batch, ...b.shape!.slice(-2)];
  const db = () =>
    swappedFrom(g, b) && sameShape(fromB, b.shape)
      ? swapLast(g, o.MatMul(swapLast(g, dy), a)) // (dyᵀ @ a)ᵀ: the Transpose's rule reads through it
      : sumToShape(g, o.MatMul(swapLast(g, a), dy), fromB, b, node); // b's shape
  return [
    wants[0] ? sumToShape(g, o.MatMul(dy, swapLast(g, b)), fromA, a, node) : null, // a's shape
    wants[1] ? db() : null,
  ];
}

/**
 * The value whose last two axes `x` is (the input of the Transpose that computes x), if so. Where b is
 * such a transpose of k (attention's keys), `db = aᵀ @ dy` would be transposed back by the Transpose's
 * rule: three kernels. `dk = dyᵀ @ a` is two, written as `(dyᵀ @ a)ᵀ` so that the Transpose's rule
 * reads through it (ops_shape.ts `transposeGrad`) and the outer Transpose is never run (GraphBuilder
 * keeps only the nodes an output needs).
 */
function swappedFrom(g: GraphBuilder, x: Value): Value | undefined {
  return transposedFrom(g, x, swapPerm(x.shape!.length));
}

/** The permutation that swaps the last two of `r` axes. */
function swapPerm(r: number): number[] {
  return Array.from({ length: r }, (_, i) => (i < r - 2 ? i : 2 * r - 3 - i));
}

/** [..., E] → [rows, E]. */
function flatten(g: GraphBuilder, x: Value): Value {
  const o = gradOps(g);
  const last = x.shape?.at(-1);
  const target = typeof last === "number" ? [-1, last] : o.Concat([g.ints([-1]), o.Shape(x, -1)], 0);
  return o.Reshape(x, target); // [rows, E]
}

/** `x` with its last two axes swapped; reads through a Transpose that did exactly that. */
function swapLast(g: GraphBuilder, x: Value): Value {
  return swappedFrom(g, x) ?? gradOps(g).Transpose(x, swapPerm(x.shape!.length));
}

/**
 * Gemm `y = alpha · A' @ B' + beta · C` (A' = Aᵀ under transA, B' likewise): each gradient is one
 * Gemm over the operands as stored, with the transposes folded into its flags.
 */
export function gemmGrad(ctx: GradContext): (Value | null)[] {
  const { g, node, wants } = ctx;
  const o = gradOps(g);
  const [a, b, c] = node.inputs;
  const dy = outGrad(ctx);
  const alpha = floatAttr(node, "alpha", 1);
  const beta = floatAttr(node, "beta", 1);
  const transA = intAttr(node, "transA", 0) === 1;
  const transB = intAttr(node, "transB", 0) === 1;
  const da = () =>
    transA
      ? o.Gemm(b!, dy, null, { alpha, transA: transB, transB: true }) // [K, M]
      : o.Gemm(dy, b!, null, { alpha, transB: !transB }); // [M, K]
  const db = () =>
    transB
      ? o.Gemm(dy, a!, null, { alpha, transA: true, transB: transA }) // [N, K]
      : o.Gemm(a!, dy, null, { alpha, transA: !transA }); // [K, N]
  const dc = () => {
    const summed = sumToShape(g, dy, node.outputs[0].shape, c!, node); // c's shape
    return beta === 1 ? summed : o.Mul(summed, beta);
  };
  return [wants[0] ? da() : null, wants[1] ? db() : null, c && wants[2] ? dc() : null];
}
