/**
 * Op table, reductions and scans: ReduceSum / Mean / Max / Min / LogSumExp, ArgMax, TopK, CumSum.
 * Each entry pairs the op's emitter (`emit_reduce.ts`) with its gradient rule, written here beside
 * the entry.
 *
 * @module
 */

import type { Value } from "./builder.ts";
import { REDUCE_EMITTERS } from "./emit_reduce.ts";
import { gradDtype, gradError, gradOps, intAttr, outGrad, shapeValue, zerosLike } from "./grad_util.ts";
import { type GradContext, type GradRule, type GradSpec, pairRules } from "./op_def.ts";
import { axisOf, numbersOf } from "./shape.ts";

/** A Reduce op's gradient: `rule` for x; the axes input carries none. */
function reduce(grad: GradRule): GradSpec {
  return { nondiff: [1], grad };
}

/** The reduce node's axes as an emitter argument: the static list where tracked, else the value. */
function axesArg(ctx: GradContext): readonly number[] | Value | undefined {
  const axes = ctx.node.inputs[1];
  return axes ? numbersOf(axes) ?? axes : undefined;
}

/** A reduce output (or its gradient) with the reduced axes back as size 1, to broadcast against x. */
function kept(ctx: GradContext, v: Value): Value {
  const axes = axesArg(ctx);
  if (intAttr(ctx.node, "keepdims", 1) === 1 || axes === undefined) return v; // all axes: v is a scalar
  return gradOps(ctx.g).Unsqueeze(v, axes);
}

/** ReduceSum: `dy` broadcast back over the reduced axes. */
function reduceSumGrad(ctx: GradContext): (Value | null)[] {
  const x = ctx.node.inputs[0] as Value;
  return [gradOps(ctx.g).Expand(kept(ctx, outGrad(ctx)), shapeValue(ctx.g, x)), null];
}

/** ReduceMean: `dy / count` broadcast back, count = product of the reduced dims. */
function reduceMeanGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const x = ctx.node.inputs[0] as Value;
  const dy = outGrad(ctx);
  const share = o.Div(kept(ctx, dy), reducedCount(ctx, gradDtype(x, dy))); // reduced shape
  return [o.Expand(share, shapeValue(ctx.g, x)), null];
}

/** Number of elements each output of a reduce covers: a constant when the dims are known. */
function reducedCount(ctx: GradContext, dtype: Value["dtype"]): number | Value {
  const x = ctx.node.inputs[0] as Value;
  const listed = ctx.node.inputs[1] ? numbersOf(ctx.node.inputs[1]) : [];
  const axes = listed?.length === 0 ? x.shape?.map((_, i) => i) : listed;
  if (!axes) {
    throw gradError(ctx.node, "the reduced axes are not known when the graph is built", "pass static axes");
  }
  const dims = axes.map((a) => (x.shape ? x.shape[axisOf(a, x.shape.length)] : undefined));
  if (dims.every((d) => typeof d === "number")) return (dims as number[]).reduce((p, d) => p * d, 1);
  const o = gradOps(ctx.g);
  const sizes = axes.map((a) => o.Shape(x, a, a === -1 ? undefined : a + 1)); // [1] each
  return o.Cast(sizes.reduce((p, d) => o.Mul(p, d)), dtype ?? "float32"); // [1]
}

/**
 * ReduceMax / ReduceMin: the gradient goes to the entries equal to the extremum. Ties share it
 * equally (each of k tied entries gets `dy / k`), which keeps the total equal to `dy`.
 */
function extremumGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const x = ctx.node.inputs[0] as Value;
  const dy = outGrad(ctx);
  const mask = o.Cast(o.Equal(x, kept(ctx, ctx.node.outputs[0])), gradDtype(x, dy)); // x's shape
  const ties = o.ReduceSum(mask, axesArg(ctx), { keepdims: true }); // reduced, kept
  return [o.Mul(mask, o.Div(kept(ctx, dy), ties)), null];
}

/**
 * ReduceLogSumExp: `dy · exp(x - y)`, the softmax over the reduced axes; over a single axis that is
 * one Softmax node (no separate difference and exponential tensors of x's size).
 */
function logSumExpGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const x = ctx.node.inputs[0] as Value;
  const axes = axesArg(ctx);
  const weights = Array.isArray(axes) && axes.length === 1
    ? o.Softmax(x, axes[0]) // x's shape
    : o.Exp(o.Sub(x, kept(ctx, ctx.node.outputs[0]))); // x's shape
  return [o.Mul(weights, kept(ctx, outGrad(ctx))), null];
}

/** TopK: each value's gradient goes back to the position it was taken from (indices output: none). */
function topKGrad(ctx: GradContext): (Value | null)[] {
  const dv = ctx.grads[0];
  if (!dv) return [null, null];
  const x = ctx.node.inputs[0] as Value;
  const zeros = zerosLike(ctx.g, x, gradDtype(x, dv));
  const axis = intAttr(ctx.node, "axis", -1);
  return [gradOps(ctx.g).ScatterElements(zeros, ctx.node.outputs[1], dv, { axis, reduction: "add" }), null];
}

/** CumSum: the cumulative sum of `dy` in the other direction (exclusive stays exclusive). */
function cumSumGrad(ctx: GradContext): (Value | null)[] {
  const exclusive = intAttr(ctx.node, "exclusive", 0) === 1;
  const reverse = intAttr(ctx.node, "reverse", 0) !== 1;
  return [gradOps(ctx.g).CumSum(outGrad(ctx), ctx.node.inputs[1] as Value, { exclusive, reverse }), null];
}

/** Reductions and scans. */
export const REDUCE_OPS = pairRules(REDUCE_EMITTERS, {
  ReduceSum: reduce(reduceSumGrad),
  ReduceMean: reduce(reduceMeanGrad),
  ReduceMax: reduce(extremumGrad),
  ReduceMin: reduce(extremumGrad),
  ReduceLogSumExp: reduce(logSumExpGrad),
  /** An index: no gradient. */
  ArgMax: { nondiff: [0] },
  TopK: { nondiff: [1], grad: topKGrad },
  CumSum: { nondiff: [1], grad: cumSumGrad },
});
