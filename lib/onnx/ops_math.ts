/**
 * Op table, math part: elementwise unary and binary ops, comparisons, Where, Clip, Cast, MatMul,
 * Gemm, Softmax. Binary ops broadcast numpy-style and accept plain numbers as scalar operands.
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { type DType, ONNX_DTYPE } from "./dtype.ts";
import { check, def, lift, type Operand } from "./op_def.ts";
import { broadcast, matmulShape } from "./shape.ts";

/** A one-input op whose output has the input's dtype and shape. */
function unary(opType: string) {
  return def(opType, (g: GraphBuilder, x: Value): Value => g.op(opType, [x], {}, { shape: x.shape }));
}

/** A two-input broadcasting op; `dtype` overrides the output dtype (comparisons give bool). */
function binary(opType: string, dtype?: DType) {
  return def(opType, (g: GraphBuilder, a: Operand, b: Operand): Value => {
    const x = lift(g, a, b);
    const y = lift(g, b, a);
    return g.op(opType, [x, y], {}, { dtype: dtype ?? x.dtype, shape: broadcast(x.shape, y.shape) });
  }, { nondiff: dtype === "bool" ? [0, 1] : undefined });
}

/** A variadic broadcasting op (Max, Min, Sum). */
function variadic(opType: string) {
  return def(opType, (g: GraphBuilder, ...xs: Operand[]): Value => {
    check(xs.length > 0, opType, "needs at least one input");
    const like = xs.find((x) => typeof x !== "number");
    const values = xs.map((x) => lift(g, x, like));
    return g.op(opType, values, {}, { shape: broadcast(...values.map((v) => v.shape)) });
  });
}

/** Elementwise ops. */
export const ELEMENTWISE_OPS = {
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
  Not: unary("Not"),
  Add: binary("Add"),
  Sub: binary("Sub"),
  Mul: binary("Mul"),
  Div: binary("Div"),
  Pow: binary("Pow"),
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

/** Other math ops. */
export const MATH_OPS = {
  Where: def("Where", where, { nondiff: [0] }),
  Clip: def("Clip", clip, { nondiff: [1, 2] }),
  Cast: def("Cast", cast),
  MatMul: def("MatMul", matmul),
  Gemm: def("Gemm", gemm),
  Softmax: def("Softmax", softmax),
};
