/**
 * Op table, math part: elementwise unary and binary ops, comparisons, Where, Clip, Cast, MatMul,
 * Gemm, Softmax, LogSoftmax. Each entry pairs the op's emitter (`emit_math.ts`) with its gradient
 * rule, written here beside the entry (MatMul's, the longest, in `grad_matmul.ts`).
 *
 * The emitters sit in their own file because the rules of every family build with them
 * (`grad_util.ts` `gradOps`): were emitters and rules in one file, the math rules would import the
 * reduce family and the reduce rules the math family, a cycle.
 *
 * @module
 */

import type { GraphBuilder, Value } from "./builder.ts";
import type { DType } from "./dtype.ts";
import { ELEMENTWISE_EMITTERS, MATH_EMITTERS } from "./emit_math.ts";
import { gemmGrad, matmulGrad } from "./grad_matmul.ts";
import { gradDtype, gradError, gradOps, intAttr, outGrad, reduceTo } from "./grad_util.ts";
import { type GradContext, type GradSpec, pairRules } from "./op_def.ts";

/** dx of a one-input op from its input, output and output gradient. */
type UnaryRule = (g: GraphBuilder, x: Value, y: Value, dy: Value) => Value;

/** A one-input op's gradient; without a rule its input is nondiff (derivative 0). */
function unary(rule?: UnaryRule): GradSpec {
  const grad = rule &&
    ((ctx: GradContext): (Value | null)[] => [
      rule(ctx.g, ctx.node.inputs[0] as Value, ctx.node.outputs[0], outGrad(ctx)),
    ]);
  return { grad, nondiff: rule ? undefined : [0] };
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

/** A broadcasting binary op's gradient; `rule` absent: comparisons and logic (bool out) or integer-only ops. */
function binary(rule?: BinaryRule): GradSpec {
  const grad = rule && ((ctx: GradContext): (Value | null)[] => {
    const [a, b] = ctx.node.inputs as Value[];
    const sum = (v: Value, i: number) => reduceTo(ctx, v, i);
    return rule({ g: ctx.g, a, b, y: ctx.node.outputs[0], dy: outGrad(ctx), wants: ctx.wants, sum });
  });
  return { grad, nondiff: rule ? undefined : [0, 1] };
}

/** A variadic broadcasting op's gradient (Max, Min, Sum); `rule` gives each input's before `reduceTo`. */
function variadic(rule: (ctx: GradContext, dy: Value) => (Value | null)[]): GradSpec {
  const grad = (ctx: GradContext): (Value | null)[] =>
    rule(ctx, outGrad(ctx)).map((v, i) => (v && ctx.wants[i] ? reduceTo(ctx, v, i) : null));
  return { grad };
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
  // The tie count as a chain of Adds rather than one Sum: the same exact count, and a provider without a
  // Sum kernel (WebGPU) keeps it on the device (lib/model/graph/forms.ts).
  const ties = masks.slice(1).reduce((total, m) => o.Add(total, m), masks[0]); // [out]
  const share = o.Div(dy, ties); // [out]
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

const BINARY_MUL = binary(mulGrad).grad!;

/**
 * Mul, where it is SiLU `s = x · Sigmoid(x)` (compose.ts `silu`): x's whole gradient here, as one
 * function's, `dy · (σ + s − s·σ)` (four kernels; the Mul's and the Sigmoid's rules would take six: two
 * products, σ(1 − σ), another product and the sum of the two paths). The Sigmoid gets nothing from this
 * Mul, so its rule runs only where σ reaches the loss another way too. Any other product: `mulGrad`.
 */
function mulOrSiluGrad(ctx: GradContext): (Value | null)[] {
  const [x, sigma] = ctx.node.inputs as Value[];
  const source = ctx.g.producer(sigma);
  const silu = source?.opType === "Sigmoid" && source.domain === "" && source.inputs[0]?.name === x.name;
  if (!silu || !ctx.wants[0] || x.name === sigma.name) return BINARY_MUL(ctx);
  const o = gradOps(ctx.g);
  const s = ctx.node.outputs[0];
  return [o.Mul(outGrad(ctx), o.Add(o.Sub(s, o.Mul(s, sigma)), sigma)), null]; // x's shape
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
export const ELEMENTWISE_OPS = pairRules(ELEMENTWISE_EMITTERS, {
  Identity: unary((_g, _x, _y, dy): Value => dy),
  Neg: unary((g, _x, _y, dy): Value => gradOps(g).Neg(dy)),
  /** Uses Sign, so the gradient at exactly 0 is 0. */
  Abs: unary((g, x, _y, dy): Value => gradOps(g).Mul(dy, gradOps(g).Sign(x))),
  Sqrt: unary((g, _x, y, dy): Value => gradOps(g).Div(dy, gradOps(g).Mul(y, 2))),
  Reciprocal: unary(reciprocalGrad),
  Exp: unary((g, _x, y, dy): Value => gradOps(g).Mul(dy, y)),
  Log: unary((g, x, _y, dy): Value => gradOps(g).Div(dy, x)),
  Tanh: unary(tanhGrad),
  Sigmoid: unary(sigmoidGrad),
  Sin: unary((g, x, _y, dy): Value => gradOps(g).Mul(dy, gradOps(g).Cos(x))),
  Cos: unary((g, x, _y, dy): Value => gradOps(g).Neg(gradOps(g).Mul(dy, gradOps(g).Sin(x)))),
  Erf: unary(erfGrad),
  /** Piecewise constant: no gradient flows (derivative 0 almost everywhere). */
  Floor: unary(),
  /** Piecewise constant: no gradient flows. */
  Sign: unary(),
  Not: unary(),
  Add: binary(({ dy, wants, sum }): Pair => [wants[0] ? sum(dy, 0) : null, wants[1] ? sum(dy, 1) : null]),
  Sub: binary(({ g, dy, wants, sum }): Pair => [
    wants[0] ? sum(dy, 0) : null,
    wants[1] ? gradOps(g).Neg(sum(dy, 1)) : null, // negated after summing: the smaller tensor
  ]),
  Mul: { grad: mulOrSiluGrad },
  Div: binary(divGrad),
  Pow: binary(powGrad),
  /** Integer-only (see the emitter): no gradient. */
  Mod: binary(),
  Equal: binary(),
  Less: binary(),
  LessOrEqual: binary(),
  Greater: binary(),
  GreaterOrEqual: binary(),
  And: binary(),
  Or: binary(),
  Max: variadic(extremumGrad),
  Min: variadic(extremumGrad),
  Sum: variadic((ctx, dy): Value[] => ctx.node.inputs.map(() => dy)),
});

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
export const MATH_OPS = pairRules(MATH_EMITTERS, {
  Where: { nondiff: [0], grad: whereGrad },
  Clip: { nondiff: [1, 2], grad: clipGrad },
  Cast: { grad: castGrad },
  MatMul: { grad: matmulGrad },
  Gemm: { grad: gemmGrad },
  Softmax: { grad: softmaxGrad },
  LogSoftmax: { grad: logSoftmaxGrad },
});
