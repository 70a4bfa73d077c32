/**
 * Emitters of the math family: elementwise unary and binary ops, comparisons, Where, Clip, Cast,
 * MatMul, Gemm, Softmax, LogSoftmax. Binary ops broadcast numpy-style and accept plain numbers as
 * scalar operands.
 *
 * Only the emitters live here; `ops_math.ts` pairs each with its gradient rule. Keeping them apart
 * lets the gradient rules of every family build with these emitters (`grad_util.ts` `gradOps`)
 * without importing the tables that hold the rules, so the op table has no import cycle.
 *
 * @module
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { type DType, ONNX_DTYPE } from "./dtype.ts";
import { check, lift, type Operand } from "./op_def.ts";
import { broadcast, intArith, intsOf, matmulShape, trackInts } from "./shape.ts";

/** A one-input op with the input's dtype and shape. */
function unary(opType: string) {
  return (g: GraphBuilder, x: Value): Value => g.op(opType, [x], {}, { shape: x.shape });
}

/** A two-input broadcasting op; `dtype` fixes the output's (bool for comparisons and logic). */
function binary(opType: string, dtype?: DType) {
  return (g: GraphBuilder, a: Operand, b: Operand): Value => {
    const x = lift(g, a, b);
    const y = lift(g, b, a);
    const out = g.op(opType, [x, y], {}, { dtype: dtype ?? x.dtype, shape: broadcast(x.shape, y.shape) });
    const known = (v: Operand) => (typeof v === "number" ? [v] : intsOf(v));
    return trackInts(out, intArith(opType, known(a), known(b)));
  };
}

/** A variadic broadcasting op (Max, Min, Sum). */
function variadic(opType: string) {
  return (g: GraphBuilder, ...xs: Operand[]): Value => {
    check(xs.length > 0, opType, "needs at least one input");
    const like = xs.find((x) => typeof x !== "number");
    const values = xs.map((x) => lift(g, x, like));
    return g.op(opType, values, {}, { shape: broadcast(...values.map((v) => v.shape)) });
  };
}

/** Elementwise ops, keyed by ONNX op type. */
export const ELEMENTWISE_EMITTERS = {
  Identity: unary("Identity"),
  Neg: unary("Neg"),
  Abs: unary("Abs"),
  Sqrt: unary("Sqrt"),
  Reciprocal: unary("Reciprocal"),
  Exp: unary("Exp"),
  Log: unary("Log"),
  Tanh: unary("Tanh"),
  Sigmoid: unary("Sigmoid"),
  Sin: unary("Sin"),
  Cos: unary("Cos"),
  Erf: unary("Erf"),
  Floor: unary("Floor"),
  Sign: unary("Sign"),
  Not: unary("Not"),
  Add: binary("Add"),
  Sub: binary("Sub"),
  Mul: binary("Mul"),
  Div: binary("Div"),
  Pow: binary("Pow"),
  /** Integer-only here (the emitter leaves `fmod` 0, which ONNX forbids for floats). */
  Mod: binary("Mod"),
  Equal: binary("Equal", "bool"),
  Less: binary("Less", "bool"),
  LessOrEqual: binary("LessOrEqual", "bool"),
  Greater: binary("Greater", "bool"),
  GreaterOrEqual: binary("GreaterOrEqual", "bool"),
  And: binary("And", "bool"),
  Or: binary("Or", "bool"),
  Max: variadic("Max"),
  Min: variadic("Min"),
  Sum: variadic("Sum"),
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

/** Other math ops, keyed by ONNX op type. */
export const MATH_EMITTERS = {
  Where: where,
  Clip: clip,
  Cast: cast,
  MatMul: matmul,
  Gemm: gemm,
  Softmax: softmax,
  LogSoftmax: logSoftmax,
};
