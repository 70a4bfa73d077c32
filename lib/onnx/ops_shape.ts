/**
 * Op table, shapes and indexing: Reshape, Transpose, Concat, Split, Slice, Pad, Unsqueeze, Squeeze,
 * Expand, Shape, Gather, GatherElements, GatherND, ScatterElements, ScatterND, ConstantOfShape,
 * Range, Trilu. Each entry pairs the op's emitter (`emit_shape.ts`) with its gradient rule, written
 * here beside the entry (the longer ones in `grad_shape.ts`).
 *
 * @module
 */

import type { GraphBuilder, Value } from "./builder.ts";
import { SHAPE_EMITTERS } from "./emit_shape.ts";
import { concatGrad, gatherGrad, padGrad, sliceGrad } from "./grad_shape.ts";
import {
  gradDtype,
  gradError,
  gradOps,
  intAttr,
  intsAttr,
  outGrad,
  shapeValue,
  stringAttr,
  sumToShape,
  transposedFrom,
  zerosLike,
} from "./grad_util.ts";
import { type GradContext, pairRules } from "./op_def.ts";
import { intsOf, numbersOf, type Shape } from "./shape.ts";

/**
 * Reshape: `dy` reshaped back to the input's shape, by a constant target where the tracked shapes
 * allow one (no `Shape` kernel at run time), else by one the forward recorded for the input
 * (`GraphBuilder.noteReshapeTarget`), else by the input's shape read at run time.
 */
function reshapeGrad(ctx: GradContext): (Value | null)[] {
  const x = ctx.node.inputs[0] as Value;
  const dy = outGrad(ctx);
  const target = staticReshapeTarget(x.shape, dy.shape) ?? ctx.g.reshapeTargetOf(x) ?? shapeValue(ctx.g, x);
  const dx = gradOps(ctx.g).Reshape(dy, target);
  return [x.shape && !dx.shape ? { ...dx, shape: x.shape } : dx, null]; // x's shape, where -1 hid it
}

/**
 * A constant Reshape target turning a value of shape `from` into one of shape `to`: `to`'s numbers as
 * they are, 0 (copy) for a symbolic dim `from` has at the same axis, and -1 for at most one other
 * symbolic dim (inferred, as the element counts are equal). Undefined where a shape is not tracked or
 * two dims would be left to infer.
 */
export function staticReshapeTarget(to: Shape, from: Shape): number[] | undefined {
  if (!to || !from || to.includes(0)) return undefined; // a literal 0 would read as "copy"
  const target = to.map((d, i) => (typeof d === "number" ? d : d === from[i] ? 0 : -1));
  return target.filter((d) => d === -1).length <= 1 ? target : undefined;
}

/**
 * Transpose: `dy` under the inverse permutation; where dy is itself a Transpose by this node's
 * permutation (a rule wrote it so: grad_matmul.ts), its input, with no kernel.
 */
function transposeGrad(ctx: GradContext): (Value | null)[] {
  const perm = intsAttr(ctx.node, "perm");
  const inverse = perm?.map((_, i) => perm.indexOf(i));
  const dy = outGrad(ctx);
  const through = perm && transposedFrom(ctx.g, dy, perm);
  return [through ?? gradOps(ctx.g).Transpose(dy, inverse)];
}

/** Split: the output gradients joined again (zeros for outputs that do not reach the loss). */
function splitGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const dy = ctx.grads.find((v) => v) as Value;
  const dtype = gradDtype(ctx.node.inputs[0] as Value, dy);
  const parts = ctx.node.outputs.map((y, i) => ctx.grads[i] ?? zerosLike(ctx.g, y, dtype));
  return [o.Concat(parts, intAttr(ctx.node, "axis", 0)), null];
}

/** The axes input of (Un)Squeeze as an emitter argument: a list where tracked. */
function axesArg(ctx: GradContext): readonly number[] | Value {
  const axes = ctx.node.inputs[1] as Value;
  return numbersOf(axes) ?? axes;
}

/** Unsqueeze: the added axes squeezed out of `dy`. */
function unsqueezeGrad(ctx: GradContext): (Value | null)[] {
  return [gradOps(ctx.g).Squeeze(outGrad(ctx), axesArg(ctx)), null];
}

/** Squeeze: the removed axes put back (a reshape when Squeeze had no axes). */
function squeezeGrad(ctx: GradContext): (Value | null)[] {
  if (!ctx.node.inputs[1]) return reshapeGrad(ctx);
  return [gradOps(ctx.g).Unsqueeze(outGrad(ctx), axesArg(ctx)), null];
}

/** Expand: `dy` summed over the broadcast axes. */
function expandGrad(ctx: GradContext): (Value | null)[] {
  const [x, shape] = ctx.node.inputs as Value[];
  const length = intsOf(shape)?.length ?? shape.shape?.[0];
  const rank = typeof length === "number" && x.shape ? Math.max(length, x.shape.length) : undefined;
  const from = ctx.node.outputs[0].shape ?? (rank === undefined ? undefined : Array(rank).fill(undefined));
  return [sumToShape(ctx.g, outGrad(ctx), from, x, ctx.node), null];
}

/** GatherElements: `dy` added into zeros at the gathered positions (duplicates accumulate). */
function gatherElementsGrad(ctx: GradContext): (Value | null)[] {
  const [data, indices] = ctx.node.inputs as Value[];
  const dy = outGrad(ctx);
  const axis = intAttr(ctx.node, "axis", 0);
  const zeros = zerosLike(ctx.g, data, gradDtype(data, dy));
  return [gradOps(ctx.g).ScatterElements(zeros, indices, dy, { axis, reduction: "add" }), null];
}

/** GatherND: `dy` added into zeros at the gathered slices (duplicates accumulate). */
function gatherNDGrad(ctx: GradContext): (Value | null)[] {
  const [data, indices] = ctx.node.inputs as Value[];
  const dy = outGrad(ctx);
  return [gradOps(ctx.g).ScatterND(zerosLike(ctx.g, data, gradDtype(data, dy)), indices, dy, "add"), null];
}

/**
 * ScatterElements / ScatterND with reduction none or add: `updates` get `dy` gathered at their
 * indices; `data` gets `dy`, with the overwritten positions zeroed under reduction none (with
 * repeated indices, ONNX leaves which update wins unspecified, and so is this gradient).
 */
function scatterGrad(gather: (g: GraphBuilder, dy: Value, ctx: GradContext) => Value) {
  return (ctx: GradContext): (Value | null)[] => {
    const o = gradOps(ctx.g);
    const [, indices, updates] = ctx.node.inputs as Value[];
    const dy = outGrad(ctx);
    const reduction = stringAttr(ctx.node, "reduction", "none");
    if (reduction !== "none" && reduction !== "add") {
      throw gradError(ctx.node, `reduction ${reduction} has no gradient rule`, "use reduction none or add");
    }
    const cleared = () =>
      ctx.node.opType === "ScatterND"
        ? o.ScatterND(dy, indices, zerosLike(ctx.g, updates, gradDtype(updates, dy)))
        : o.ScatterElements(dy, indices, zerosLike(ctx.g, updates, gradDtype(updates, dy)), {
          axis: intAttr(ctx.node, "axis", 0),
        });
    const dData = ctx.wants[0] ? (reduction === "add" ? dy : cleared()) : null;
    return [dData, null, ctx.wants[2] ? gather(ctx.g, dy, ctx) : null];
  };
}

/** Trilu: the same triangle of `dy`. */
function triluGrad(ctx: GradContext): (Value | null)[] {
  const upper = intAttr(ctx.node, "upper", 1) === 1;
  return [gradOps(ctx.g).Trilu(outGrad(ctx), upper, ctx.node.inputs[1] ?? 0), null];
}

/** Shape and indexing ops. */
export const SHAPE_OPS = pairRules(SHAPE_EMITTERS, {
  Reshape: { nondiff: [1], grad: reshapeGrad },
  Transpose: { grad: transposeGrad },
  Concat: { grad: concatGrad },
  Split: { nondiff: [1], grad: splitGrad },
  Slice: { nondiff: [1, 2, 3, 4], grad: sliceGrad },
  Pad: { nondiff: [1, 2, 3], grad: padGrad },
  Unsqueeze: { nondiff: [1], grad: unsqueezeGrad },
  Squeeze: { nondiff: [1], grad: squeezeGrad },
  Expand: { nondiff: [1], grad: expandGrad },
  Shape: { nondiff: [0] },
  Gather: { nondiff: [1], grad: gatherGrad },
  GatherElements: { nondiff: [1], grad: gatherElementsGrad },
  GatherND: { nondiff: [1], grad: gatherNDGrad },
  ScatterElements: {
    nondiff: [1],
    grad: scatterGrad((g, dy, ctx): Value =>
      gradOps(g).GatherElements(dy, ctx.node.inputs[1] as Value, intAttr(ctx.node, "axis", 0))
    ),
  },
  ScatterND: {
    nondiff: [1],
    grad: scatterGrad((g, dy, ctx): Value => gradOps(g).GatherND(dy, ctx.node.inputs[1] as Value)),
  },
  ConstantOfShape: { nondiff: [0] },
  Range: { nondiff: [0, 1, 2] },
  Trilu: { nondiff: [1], grad: triluGrad },
});
