/**
 * Op table, fused RMSNorm: `SimplifiedLayerNormalization` (ONNX domain, onnxruntime's) and
 * `com.microsoft.SkipSimplifiedLayerNormalization` (the residual add and the norm in one kernel). They are
 * a documented exception to "few primitive ops" (rmsNorm in compose.ts is the primitive form): composed,
 * one RMSNorm is seven kernels, with Casts around it in float16 — in a 28-layer decoder about a thousand
 * kernels of a decode step's ~1,900, each a dispatch on a GPU. Both the CPU and the WebGPU providers
 * implement them; their statistics are float32 (`stash_type` 1) whatever the input dtype, as rmsNorm's
 * float16 form computes them.
 *
 *   y = x · inv · w,  inv = (mean(x², last axis) + eps)^(-1/2)           x [..., E], w [E], inv [..., 1]
 *
 * Gradient (x̂ = x · inv, g = dy · w):
 *
 *   dx = inv · (g − x̂ · mean(g · x̂))               dw = Σ over the leading axes of dy · x̂
 *
 * computed in float32 from x (x̂ again, not the forward output y, which in float16 would cost a Cast and
 * carry float16's rounding) and cast back to x's dtype: seven kernels where inv is read from the forward
 * node's `inv_std_var` output (the CPU provider writes it: `GradContext.readsNormStats`), four nodes
 * more (two GPU dispatches) where it is computed again from x (the WebGPU kernels do not write it:
 * `invStdVar`). The skip form adds `s = input + skip` first and returns s as a fourth output (the residual
 * stream); its rule adds s's own gradient and gives the sum to both.
 *
 * @module
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import type { DType } from "./dtype.ts";
import { floatAttr, gradError, gradOps, outGrad, sumToShape } from "./grad_util.ts";
import { check, def, type GradContext } from "./op_def.ts";
import { MS_DOMAIN } from "./ops_contrib.ts";

/** Weights known to be all ones (`unitNormWeight`): the gradient rule skips its `dy · w`. */
const UNIT_WEIGHTS = new WeakSet<Value>();

/** A `[E]` weight of ones in `dtype`, for a norm whose weight is applied after it (by a Mul). */
export function unitNormWeight(g: GraphBuilder, size: number, dtype: "float32" | "float16"): Value {
  const data = dtype === "float16" ? new Uint16Array(size).fill(0x3c00) : new Float32Array(size).fill(1); // 1.0
  const w = g.constant(data, [size], dtype);
  UNIT_WEIGHTS.add(w);
  return w;
}

/**
 * RMSNorm of x over its last axis with weight `[E]` (x's dtype): y, x's shape and dtype. With `stats`
 * the node also declares its `inv_std_var` output (float32 `[..., 1]`), for the gradient rule to read
 * where the provider writes it.
 */
function simplifiedLayerNormalization(
  g: GraphBuilder,
  x: Value,
  weight: Value,
  epsilon: number,
  stats = false,
): Value {
  check(weight.dtype === x.dtype, "SimplifiedLayerNormalization", "the weight must have the input's dtype");
  const attrs = { axis: attr.int(-1), epsilon: attr.float(epsilon), stash_type: attr.int(1) };
  if (!stats) return g.op("SimplifiedLayerNormalization", [x, weight], attrs, { shape: x.shape });
  return g.opN("SimplifiedLayerNormalization", [x, weight], 2, attrs, {
    dtype: [x.dtype, "float32"],
    shape: [x.shape, statShape(x)],
  })[0];
}

/**
 * `[y, sum]`: `sum = input + skip` (same shape, `[..., E]`) and y its RMSNorm with `weight` `[E]`, in one
 * kernel. The op's `mean` and `inv_std_var` outputs (the second and third) are named; only the gradient
 * rule reads inv_std_var, and only where the provider writes it (the WebGPU kernel does not).
 */
function skipSimplifiedLayerNormalization(
  g: GraphBuilder,
  input: Value,
  skip: Value,
  weight: Value,
  epsilon: number,
): [Value, Value] {
  const op = "SkipSimplifiedLayerNormalization";
  check(
    input.dtype === "float32" || input.dtype === "float16",
    op,
    "onnxruntime's kernels take float32 and float16",
  );
  check(skip.dtype === input.dtype && weight.dtype === input.dtype, op, "inputs must share one dtype");
  const [y, , , sum] = g.opN(op, [input, skip, weight], 4, { epsilon: attr.float(epsilon) }, {
    domain: MS_DOMAIN,
    dtype: [input.dtype, "float32", "float32", input.dtype],
    shape: [input.shape, statShape(input), statShape(input), input.shape],
  });
  return [y, sum];
}

function statShape(x: Value) {
  return x.shape ? [...x.shape.slice(0, -1), 1] : undefined;
}

/**
 * dx (x's dtype) and dw of `y = x · inv · w`, with `saved` the forward's inv (null: computed again from
 * x); null where not wanted.
 */
function rmsNormGrad(
  ctx: GradContext,
  io: { x: Value; weight: Value; saved: Value | null },
  dy: Value,
  wants: { x: boolean; w: boolean },
): [Value | null, Value | null] {
  const { x, weight } = io;
  const o = gradOps(ctx.g);
  const wide = (
    v: Value,
  ): Value => (v.dtype === "float32" || v.dtype === "float64" ? v : o.Cast(v, "float32"));
  const xWide = wide(x); // [..., E]
  const eps = floatAttr(ctx.node, "epsilon", 1e-5);
  const inv = io.saved ?? invStdVar(ctx.g, xWide, eps); // [..., 1]
  const xHat = o.Mul(xWide, inv); // [..., E]
  const dyWide = wide(dy); // [..., E]
  let dx: Value | null = null;
  if (wants.x) {
    const gw = UNIT_WEIGHTS.has(weight) ? dyWide : o.Mul(dyWide, wide(weight)); // [..., E]
    const m = o.ReduceMean(o.Mul(gw, xHat), [-1], { keepdims: true }); // [..., 1]
    dx = narrow(ctx.g, o.Mul(o.Sub(gw, o.Mul(xHat, m)), inv), x.dtype); // [..., E]
  }
  let dw: Value | null = null;
  if (wants.w) {
    const perRow = o.Mul(dyWide, xHat); // [..., E]
    dw = narrow(ctx.g, sumToShape(ctx.g, perRow, x.shape, weight, ctx.node), weight.dtype); // [E]
  }
  return [dx, dw];
}

/**
 * `(mean(x², last axis) + eps)^(-1/2)` `[..., 1]` for a norm whose kernel did not keep it: the
 * `InvStdDev` output of a standard LayerNormalization over the two rows `[x, -x]` (`[..., 2, E]`,
 * normalized over both axes: mean 0, so its variance is mean(x²)). onnxruntime's WebGPU
 * LayerNormalization writes that output, its SimplifiedLayerNormalization does not. The rows are one
 * broadcast Mul of x (unsqueezed: no kernel) by `[[1], [-1]]`, so two kernels on WebGPU where Mul,
 * ReduceMean, Add and Pow are four (the Unsqueeze and the final Squeeze alias their input).
 */
function invStdVar(g: GraphBuilder, x: Value, eps: number): Value {
  const o = gradOps(g);
  const E = x.shape?.at(-1);
  if (typeof E !== "number" || x.dtype !== "float32") {
    return o.Pow(o.Add(o.ReduceMean(o.Mul(x, x), [-1], { keepdims: true }), eps), -0.5);
  }
  const signs = g.constant(new Float32Array([1, -1]), [2, 1], "float32");
  const rows = o.Mul(o.Unsqueeze(x, [-2]), signs); // [..., 2, E]
  const ones = g.constant(new Float32Array(2 * E).fill(1), [2, E], "float32");
  const attrs = { axis: attr.int(-2), epsilon: attr.float(eps), stash_type: attr.int(1) };
  const stats = [...(statShape(x) ?? []), 1];
  const inv = g.opN("LayerNormalization", [rows, ones], 3, attrs, {
    dtype: ["float32", "float32", "float32"],
    shape: [rows.shape, stats, stats],
  })[2]; // [..., 1, 1]
  return o.Squeeze(inv, [-1]); // [..., 1]
}

function narrow(g: GraphBuilder, v: Value, dtype: DType | undefined): Value {
  return dtype === undefined || v.dtype === dtype ? v : gradOps(g).Cast(v, dtype);
}

function simplifiedGrad(ctx: GradContext): (Value | null)[] {
  const [x, weight] = ctx.node.inputs as Value[];
  const [, inv] = ctx.node.outputs;
  const io = { x, weight, saved: ctx.readsNormStats && inv ? inv : null };
  return rmsNormGrad(ctx, io, outGrad(ctx), { x: ctx.wants[0], w: ctx.wants[1] });
}

function skipSimplifiedGrad(ctx: GradContext): (Value | null)[] {
  ctx.grads.forEach((grad, i) => {
    if (grad && (i === 1 || i === 2)) {
      throw gradError(ctx.node, `output ${i} reaches the loss`, "read y and the sum only");
    }
  });
  const [, , weight] = ctx.node.inputs as Value[];
  const [, , inv, sum] = ctx.node.outputs;
  const dy = ctx.grads[0];
  const wantSum = ctx.wants[0] || ctx.wants[1];
  const io = { x: sum, weight, saved: ctx.readsNormStats ? inv : null };
  const [dNorm, dw] = dy ? rmsNormGrad(ctx, io, dy, { x: wantSum, w: ctx.wants[2] }) : [null, null];
  const dSum = ctx.grads[3];
  const ds = dNorm && dSum ? gradOps(ctx.g).Add(dNorm, dSum) : dNorm ?? dSum; // [..., E]
  return [ctx.wants[0] ? ds : null, ctx.wants[1] ? ds : null, dw];
}

/** Fused RMSNorm ops (see the module comment). */
export const NORM_OPS = {
  SimplifiedLayerNormalization: def("SimplifiedLayerNormalization", simplifiedLayerNormalization, {
    grad: simplifiedGrad,
  }),
  SkipSimplifiedLayerNormalization: def(
    "SkipSimplifiedLayerNormalization",
    skipSimplifiedLayerNormalization,
    {
      domain: MS_DOMAIN,
      grad: skipSimplifiedGrad,
    },
  ),
};
