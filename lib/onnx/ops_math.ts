/**
 * Op table, math part: elementwise unary and binary ops, comparisons, Where, Clip, Cast, MatMul,
 * Gemm, Softmax, LogSoftmax. Binary ops broadcast numpy-style and accept plain numbers as scalar operands.
 * Each entry's gradient rule sits beside its emitter (MatMul's, the longest, in `grad_matmul.ts`).
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { type DType, ONNX_DTYPE } from "./dtype.ts";
import { gemmGrad, matmulGrad } from "./grad_matmul.ts";
import { gradDtype, gradError, gradOps, intAttr, outGrad, reduceTo } from "./grad_util.ts";
import { check, def, type GradContext, lift, type Operand } from "./op_def.ts";
import { broadcast, intArith, intsOf, matmulShape, trackInts } from "./shape.ts";

/** dx of a one-input op from its input, output and output gradient. */
type UnaryRule = (g: GraphBuilder, x: Value, y: Value, dy: Value) => Value;

/** A one-input op with the input's dtype and shape; without a rule its input is nondiff (derivative 0). */
function unary(opType: string, rule?: UnaryRule) {
  const grad = rule &&
    ((ctx: GradContext): (Value | null)[] => [
      rule(ctx.g, ctx.node.inputs[0] as Value, ctx.node.outputs[0], outGrad(ctx)),
    ]);
  return def(opType, (g: GraphBuilder, x: Value): Value => g.op(opType, [x], {}, { shape: x.shape }), {
    grad,
    nondiff: rule ? undefined : [0],
  });
}

/** What a binary op's rule sees: operands, output, its gradient, and `sum` to an operand's shape. */
interface BinaryArgs {
  g: GraphBuilder;
  a: Value;
  b: Value;
  y: Value;
  dy: Value;
  wants: readonly boolean[];
  /** Sums an output-shaped gradient over the axes operand `i` was broadcast along. */
  sum: (v: Value, i: number) => Value;
}

/** dA and dB of a broadcasting binary op (each summed with `sum`; `null` where not wanted). */
type BinaryRule = (args: BinaryArgs) => Pair;

/** Gradients of two operands (`null` where not wanted). */
type Pair = [Value | null, Value | null];

/** A two-input broadcasting op; `rule` absent: comparisons and logic (bool out) or integer-only ops. */
function binary(opType: string, rule?: BinaryRule, dtype?: DType) {
  const grad = rule && ((ctx: GradContext): (Value | null)[] => {
    const [a, b] = ctx.node.inputs as Value[];
    const sum = (v: Value, i: number) => reduceTo(ctx, v, i);
    return rule({ g: ctx.g, a, b, y: ctx.node.outputs[0], dy: outGrad(ctx), wants: ctx.wants, sum });
  });
  return def(opType, (g: GraphBuilder, a: Operand, b: Operand): Value => {
    const x = lift(g, a, b);
    const y = lift(g, b, a);
    const out = g.op(opType, [x, y], {}, { dtype: dtype ?? x.dtype, shape: broadcast(x.shape, y.shape) });
    const known = (v: Operand) => (typeof v === "number" ? [v] : intsOf(v));
    return trackInts(out, intArith(opType, known(a), known(b)));
  }, { grad, nondiff: rule ? undefined : [0, 1] });
}

/** A variadic broadcasting op (Max, Min, Sum); `rule` gives each input's gradient before `reduceTo`. */
function variadic(opType: string, rule: (ctx: GradContext, dy: Value) => (Value | null)[]) {
  const grad = (ctx: GradContext): (Value | null)[] =>
    rule(ctx, outGrad(ctx)).map((v, i) => (v && ctx.wants[i] ? reduceTo(ctx, v, i) : null));
  return def(opType, (g: GraphBuilder, ...xs: Operand[]): Value => {
    check(xs.length > 0, opType, "needs at least one input");
    const like = xs.find((x) => typeof x !== "number");
    const values = xs.map((x) => lift(g, x, like));
    return g.op(opType, values, {}, { shape: broadcast(...values.map((v) => v.shape)) });
  }, { grad });
}

/**
 * Max / Min: the gradient goes to the inputs equal to the result; where several tie, it is split
 * equally between them (each gets `dy / ties`), so the parts still sum to `dy`.
 */
function extremumGrad(ctx: GradContext, dy: Value): (Value | null)[] {
  const o = gradOps(ctx.g);
  const xs = ctx.node.inputs as Value[];
  if (xs.length === 1) return [dy];
  const y = ctx.node.outputs[0];
  const dtype = gradDtype(y, dy);
  const masks = xs.map((x) => o.Cast(o.Equal(x, y), dtype)); // [out] each
  const share = o.Div(dy, o.Sum(...masks)); // [out]
  return masks.map((m, i) => (ctx.wants[i] ? o.Mul(share, m) : null));
}

/** Reciprocal: `-dy · y²`. */
function reciprocalGrad(g: GraphBuilder, _x: Value, y: Value, dy: Value): Value {
  const o = gradOps(g);
  return o.Neg(o.Mul(dy, o.Mul(y, y)));
}

/** Tanh: `dy · (1 - y²)`. */
function tanhGrad(g: GraphBuilder, _x: Value, y: Value, dy: Value): Value {
  const o = gradOps(g);
  return o.Mul(dy, o.Sub(1, o.Mul(y, y)));
}

/** Sigmoid: `dy · y · (1 - y)`. */
function sigmoidGrad(g: GraphBuilder, _x: Value, y: Value, dy: Value): Value {
  const o = gradOps(g);
  return o.Mul(dy, o.Mul(y, o.Sub(1, y)));
}

/** Erf: `dy · 2/√π · exp(-x²)`. */
function erfGrad(g: GraphBuilder, x: Value, _y: Value, dy: Value): Value {
  const o = gradOps(g);
  return o.Mul(dy, o.Mul(o.Exp(o.Neg(o.Mul(x, x))), 2 / Math.sqrt(Math.PI)));
}

/** Mul: `dy · b`, `dy · a`. */
function mulGrad({ g, a, b, dy, wants, sum }: BinaryArgs): Pair {
  const o = gradOps(g);
  return [wants[0] ? sum(o.Mul(dy, b), 0) : null, wants[1] ? sum(o.Mul(dy, a), 1) : null];
}

/** Div: `dy / b`, `-dy · y / b` (negated after summing, on the smaller tensor). */
function divGrad({ g, b, y, dy, wants, sum }: BinaryArgs): Pair {
  const o = gradOps(g);
  return [wants[0] ? sum(o.Div(dy, b), 0) : null, wants[1] ? o.Neg(sum(o.Div(o.Mul(dy, y), b), 1)) : null];
}

/** Pow: `dy · b · a^(b-1)`, `dy · y · ln(a)` (NaN for a ≤ 0, as the math says). */
function powGrad({ g, a, b, y, dy, wants, sum }: BinaryArgs): Pair {
  const o = gradOps(g);
  const exponent = b.dtype === a.dtype ? b : o.Cast(b, gradDtype(a, dy));
  return [
    wants[0] ? sum(o.Mul(dy, o.Mul(exponent, o.Pow(a, o.Sub(exponent, 1)))), 0) : null,
    wants[1] ? sum(o.Mul(dy, o.Mul(y, o.Log(a))), 1) : null,
  ];
}

/** Elementwise ops. */
export const ELEMENTWISE_OPS = {
  Identity: unary("Identity", (_g, _x, _y, dy): Value => dy),
  Neg: unary("Neg", (g, _x, _y, dy): Value => gradOps(g).Neg(dy)),
  /** Uses Sign, so the gradient at exactly 0 is 0. */
  Abs: unary("Abs", (g, x, _y, dy): Value => gradOps(g).Mul(dy, gradOps(g).Sign(x))),
  Sqrt: unary("Sqrt", (g, _x, y, dy): Value => gradOps(g).Div(dy, gradOps(g).Mul(y, 2))),
  Reciprocal: unary("Reciprocal", reciprocalGrad),
  Exp: unary("Exp", (g, _x, y, dy): Value => gradOps(g).Mul(dy, y)),
  Log: unary("Log", (g, x, _y, dy): Value => gradOps(g).Div(dy, x)),
  Tanh: unary("Tanh", tanhGrad),
  Sigmoid: unary("Sigmoid", sigmoidGrad),
  Sin: unary("Sin", (g, x, _y, dy): Value => gradOps(g).Mul(dy, gradOps(g).Cos(x))),
  Cos: unary("Cos", (g, x, _y, dy): Value => gradOps(g).Neg(gradOps(g).Mul(dy, gradOps(g).Sin(x)))),
  Erf: unary("Erf", erfGrad),
  /** Piecewise constant: no gradient flows (derivative 0 almost everywhere). */
  Floor: unary("Floor"),
  /** Piecewise constant: no gradient flows. */
  Sign: unary("Sign"),
  Not: unary("Not"),
  Add: binary(
    "Add",
    ({ dy, wants, sum }): Pair => [wants[0] ? sum(dy, 0) : null, wants[1] ? sum(dy, 1) : null],
  ),
  Sub: binary("Sub", ({ g, dy, wants, sum }): Pair => [
    wants[0] ? sum(dy, 0) : null,
    wants[1] ? gradOps(g).Neg(sum(dy, 1)) : null, // negated after summing: the smaller tensor
  ]),
  Mul: binary("Mul", mulGrad),
  Div: binary("Div", divGrad),
  Pow: binary("Pow", powGrad),
  /** Integer-only here (the emitter leaves `fmod` 0, which ONNX forbids for floats). */
  Mod: binary("Mod"),
  Equal: binary("Equal", undefined, "bool"),
  Less: binary("Less", undefined, "bool"),
  LessOrEqual: binary("LessOrEqual", undefined, "bool"),
  Greater: binary("Greater", undefined, "bool"),
  GreaterOrEqual: binary("GreaterOrEqual", undefined, "bool"),
  And: binary("And", undefined, "bool"),
  Or: binary("Or", undefined, "bool"),
  Max: variadic("Max", extremumGrad),
  Min: variadic("Min", extremumGrad),
  Sum: variadic("Sum", (ctx, dy): Value[] => ctx.node.inputs.map(() => dy)),
};

/** `cond ? a : b`, elementwise with broadcasting. */
function where(g: GraphBuilder, cond: Value, a: Operand, b: Operand): Value {
  const x = lift(g, a, b);
  const y = lift(g, b, a);
  return g.op("Where", [cond, x, y], {}, { dtype: x.dtype, shape: broadcast(cond.shape, x.shape, y.shape) });
}

/** Clamps to `[min, max]`; either bound may be left out with `null`. */
function clip(g: GraphBuilder, x: Value, min: Operand | null, max: Operand | null): Value {
  const lo = min === null ? null : lift(g, min, x);
  const hi = max === null ? null : lift(g, max, x);
  return g.op("Clip", [x, lo, hi], {}, { shape: x.shape });
}

/** Converts to `to`. */
function cast(g: GraphBuilder, x: Value, to: DType): Value {
  return g.op("Cast", [x], { to: attr.int(ONNX_DTYPE[to]) }, { dtype: to, shape: x.shape });
}

/** Numpy matmul: `[..., M, K] @ [..., K, N]` with broadcast batch dims. */
function matmul(g: GraphBuilder, a: Value, b: Value): Value {
  return g.op("MatMul", [a, b], {}, { shape: matmulShape(a.shape, b.shape) });
}

/** Options of Gemm: `alpha * A' @ B' + beta * C`. */
export interface GemmOptions {
  alpha?: number;
  beta?: number;
  transA?: boolean;
  transB?: boolean;
}

/** 2-D general matrix multiply with optional bias `c`. */
function gemm(g: GraphBuilder, a: Value, b: Value, c: Value | null = null, o: GemmOptions = {}): Value {
  const attrs = {
    alpha: attr.float(o.alpha ?? 1),
    beta: attr.float(o.beta ?? 1),
    transA: attr.int(o.transA ? 1 : 0),
    transB: attr.int(o.transB ? 1 : 0),
  };
  const m = a.shape?.[o.transA ? 1 : 0];
  const n = b.shape?.[o.transB ? 0 : 1];
  const shape = m !== undefined && n !== undefined ? [m, n] : undefined;
  return g.op("Gemm", [a, b, c], attrs, { shape });
}

/** Softmax along `axis` (default last). */
function softmax(g: GraphBuilder, x: Value, axis = -1): Value {
  return g.op("Softmax", [x], { axis: attr.int(axis) }, { shape: x.shape });
}

/**
 * LogSoftmax along `axis` (default last): onnxruntime's fused kernel, one pass. WebGPU has no kernel
 * for it (docs/ENGINE_FACTS.md); compose.ts `logSoftmax` is the portable form.
 */
function logSoftmax(g: GraphBuilder, x: Value, axis = -1): Value {
  return g.op("LogSoftmax", [x], { axis: attr.int(axis) }, { shape: x.shape });
}

/** Where: the condition gets no gradient; each branch gets `dy` where it was picked. */
function whereGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const dy = outGrad(ctx);
  const cond = ctx.node.inputs[0] as Value;
  return [
    null,
    ctx.wants[1] ? reduceTo(ctx, o.Where(cond, dy, 0), 1) : null,
    ctx.wants[2] ? reduceTo(ctx, o.Where(cond, 0, dy), 2) : null,
  ];
}

/** Clip: `dy` where the input was not clipped (`x == y`, so a value exactly at a bound passes). */
function clipGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const x = ctx.node.inputs[0] as Value;
  return [o.Where(o.Equal(x, ctx.node.outputs[0]), outGrad(ctx), 0), null, null];
}

const FLOATS: readonly (DType | undefined)[] = ["float32", "float64", "float16", "bfloat16"];

/** Cast between float types: the gradient cast back. Integer ends carry no gradient (the walk skips them). */
function castGrad(ctx: GradContext): (Value | null)[] {
  const x = ctx.node.inputs[0] as Value;
  if (!FLOATS.includes(x.dtype)) {
    throw gradError(ctx.node, `the input ${x.name} has dtype ${x.dtype ?? "unknown"}`, "Cast a float value");
  }
  return [gradOps(ctx.g).Cast(outGrad(ctx), x.dtype as DType)];
}

/** Softmax: `y * (dy - sum(dy * y))` along the softmax axis. */
function softmaxGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const y = ctx.node.outputs[0];
  const dy = outGrad(ctx);
  const dot = o.ReduceSum(o.Mul(dy, y), [intAttr(ctx.node, "axis", -1)]); // [..., 1, ...]
  return [o.Mul(y, o.Sub(dy, dot))];
}

/** LogSoftmax: `dy - exp(y) * sum(dy)` along the axis. */
function logSoftmaxGrad(ctx: GradContext): (Value | null)[] {
  const o = gradOps(ctx.g);
  const y = ctx.node.outputs[0];
  const dy = outGrad(ctx);
  const total = o.ReduceSum(dy, [intAttr(ctx.node, "axis", -1)]); // [..., 1, ...]
  return [o.Sub(dy, o.Mul(o.Exp(y), total))];
}

/** Other math ops. */
export const MATH_OPS = {
  Where: def("Where", where, { nondiff: [0], grad: whereGrad }),
  Clip: def("Clip", clip, { nondiff: [1, 2], grad: clipGrad }),
  Cast: def("Cast", cast, { grad: castGrad }),
  MatMul: def("MatMul", matmul, { grad: matmulGrad }),
  Gemm: def("Gemm", gemm, { grad: gemmGrad }),
  Softmax: def("Softmax", softmax, { grad: softmaxGrad }),
  LogSoftmax: def("LogSoftmax", logSoftmax, { grad: logSoftmaxGrad }),
};
