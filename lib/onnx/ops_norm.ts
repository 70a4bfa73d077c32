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
 * Where inv is read from the forward node's `inv_std_var` output (the CPU provider writes it:
 * `GradContext.readsNormStats`), dx is computed in float32 from x (x̂ again, not the forward output y,
 * which in float16 would cost a Cast and carry float16's rounding) and cast back to x's dtype: seven
 * kernels. Where the kernel did not keep it (WebGPU), dx comes from one LayerNormalization over `[x, -x]`
 * and two MatMuls (`projectedGrad`): six GPU programs, in x's dtype. dw (frozen in LoRA training) takes
 * the elementwise form. The skip form adds `s = input + skip` first and returns s as a fourth output (the
 * residual stream); its rule adds s's own gradient and gives the sum to both.
 *
 * @module
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { arrayOf } from "./dtype.ts";
import { castTo, floatAttr, gradError, gradOps, outGrad, sumToShape } from "./grad_util.ts";
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
  const eps = floatAttr(ctx.node, "epsilon", 1e-5);
  const unit = UNIT_WEIGHTS.has(weight);
  let dx: Value | null = null;
  if (wants.x && !io.saved && projects(x)) dx = projectedGrad(ctx.g, x, unit ? dy : o.Mul(dy, weight), eps);
  if (!wants.w && (dx || !wants.x)) return [dx, null];
  const xWide = wide(ctx.g, x); // [..., E]
  const inv = io.saved ?? invStdVar(ctx.g, xWide, eps); // [..., 1]
  const xHat = o.Mul(xWide, inv); // [..., E]
  const dyWide = wide(ctx.g, dy); // [..., E]
  if (wants.x && !dx) {
    const gw = unit ? dyWide : o.Mul(dyWide, wide(ctx.g, weight)); // [..., E]
    const m = o.ReduceMean(o.Mul(gw, xHat), [-1], { keepdims: true }); // [..., 1]
    dx = castTo(ctx.g, o.Mul(o.Sub(gw, o.Mul(xHat, m)), inv), x.dtype); // [..., E]
  }
  let dw: Value | null = null;
  if (wants.w) {
    const perRow = o.Mul(dyWide, xHat); // [..., E]
    dw = castTo(ctx.g, sumToShape(ctx.g, perRow, x.shape, weight, ctx.node), weight.dtype); // [E]
  }
  return [dx, dw];
}

/** x in float32 where it is narrower (float64 stays). */
function wide(g: GraphBuilder, v: Value): Value {
  return v.dtype === "float32" || v.dtype === "float64" ? v : gradOps(g).Cast(v, "float32");
}

/** Whether `projectedGrad` applies: float32 or float16 x with a known last dim. */
function projects(x: Value): boolean {
  return (x.dtype === "float32" || x.dtype === "float16") && typeof x.shape?.at(-1) === "number";
}

/**
 * dx = inv · (gw − x̂ · mean(gw · x̂)) (`gw = dy · w`, x's dtype) for a norm whose kernel did not keep
 * inv, from one standard LayerNormalization over the rows `[x, -x]` (`[..., 2, E]`; normalized over both
 * axes: mean 0, so its `InvStdDev` output is inv) with scale c = 1/sqrt(2E): its Y is `c · [x̂, -x̂]`.
 * Then `P = Y @ gw` (`[..., 2, 1]` = c · [Σ, -Σ], Σ = Σ gw · x̂) and `Pᵀ @ Y` = 2c² · Σ · x̂ =
 * x̂ · mean(gw · x̂): the mean and the projection as two MatMuls. Six GPU programs (the rows' Mul, the
 * LayerNormalization, two MatMuls, Sub, Mul) where the elementwise form takes eight; the Unsqueezes,
 * Reshape and Squeeze alias their input. onnxruntime's WebGPU LayerNormalization writes `InvStdDev`, its
 * SimplifiedLayerNormalization does not.
 *
 * In float16 it runs in float16, as the backward around it does (the statistics in float32 inside the
 * LayerNormalization, `stash_type` 1; inv cast to float16, a one-per-row tensor): three `[..., E]` Casts
 * fewer than a float32 detour, at a measured cost (tests/onnx/norm_grad_webgpu_test.ts, docs/ENGINE_FACTS.md).
 */
function projectedGrad(g: GraphBuilder, x: Value, gw: Value, eps: number): Value {
  const o = gradOps(g);
  const rank = x.shape!.length;
  const E = x.shape!.at(-1) as number;
  const [y, inv] = normalizedRows(g, x, 1 / Math.sqrt(2 * E), eps); // [..., 2, E], [..., 1, 1] float32
  const p = o.MatMul(y, o.Unsqueeze(gw, [-1])); // [..., 2, 1]
  const pT = o.Reshape(p, [...Array(rank - 1).fill(0), 1, 2]); // [..., 1, 2]
  const along = o.MatMul(pT, y); // [..., 1, E]: x̂ · mean(gw · x̂)
  const dx = o.Mul(o.Sub(o.Unsqueeze(gw, [-2]), along), castTo(g, inv, x.dtype)); // [..., 1, E]
  return o.Squeeze(dx, [-2]); // [..., E]
}

/**
 * `(mean(x², last axis) + eps)^(-1/2)` `[..., 1]` for a norm whose kernel did not keep it, for the weight's
 * gradient and where `projectedGrad` does not apply: `normalizedRows`'s inv where x is float32.
 */
function invStdVar(g: GraphBuilder, x: Value, eps: number): Value {
  const o = gradOps(g);
  if (typeof x.shape?.at(-1) !== "number" || x.dtype !== "float32") {
    return o.Pow(o.Add(o.ReduceMean(o.Mul(x, x), [-1], { keepdims: true }), eps), -0.5);
  }
  return o.Squeeze(normalizedRows(g, x, 1, eps)[1], [-1]); // [..., 1]
}

/**
 * LayerNormalization of the rows `[x, -x]` (`[..., 2, E]`, one broadcast Mul of x unsqueezed) over their
 * last two axes, with every scale entry `c`: `[Y, inv]`, Y = `c · [x̂, -x̂]` in x's dtype (float32 or
 * float16, E known), inv float32 `[..., 1, 1]` (the rows have mean 0, so their variance is mean(x²)).
 */
function normalizedRows(g: GraphBuilder, x: Value, c: number, eps: number): [Value, Value] {
  const dtype = x.dtype as "float32" | "float16";
  const E = x.shape!.at(-1) as number;
  const signs = g.constant(arrayOf(dtype, [1, -1]), [2, 1], dtype);
  const rows = gradOps(g).Mul(gradOps(g).Unsqueeze(x, [-2]), signs); // [..., 2, E]
  const scale = g.constant(arrayOf(dtype, Array(2 * E).fill(c)), [2, E], dtype);
  const attrs = { axis: attr.int(-2), epsilon: attr.float(eps), stash_type: attr.int(1) };
  const stats = rows.shape ? [...rows.shape.slice(0, -2), 1, 1] : undefined;
  const [y, , inv] = g.opN("LayerNormalization", [rows, scale], 3, attrs, {
    dtype: [dtype, "float32", "float32"],
    shape: [rows.shape, stats, stats],
  });
  return [y, inv];
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
