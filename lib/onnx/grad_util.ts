/**
 * Helpers shared by the gradient rules of the op table: the bound emitters a rule builds with,
 * attribute readers, `reduceTo` (sums a broadcast gradient back to an input's shape) and small
 * shape utilities. Rules use only ops of the table, through `gradOps(g)`.
 *
 * `gradOps` binds the emitter files (`emit_*.ts`), never the tables (`ops_*.ts`): the tables hold
 * the rules that import this file, so the emitters sit below both and no import runs in a circle.
 *
 * @module
 */

import type { GraphBuilder, NodeRecord, Value } from "./builder.ts";
import type { DType } from "./dtype.ts";
import { ELEMENTWISE_EMITTERS, MATH_EMITTERS } from "./emit_math.ts";
import { REDUCE_EMITTERS } from "./emit_reduce.ts";
import { SHAPE_EMITTERS } from "./emit_shape.ts";
import { bindEmitters, type BoundEmitters, type GradContext } from "./op_def.ts";
import type { Dim } from "./proto.ts";
import { sameShape, type Shape, trackInts } from "./shape.ts";

const GRAD_EMITTERS = { ...ELEMENTWISE_EMITTERS, ...MATH_EMITTERS, ...REDUCE_EMITTERS, ...SHAPE_EMITTERS };

/** The emitters gradient rules may use, bound to one builder. */
export type GradOps = BoundEmitters<typeof GRAD_EMITTERS>;

const bound = new WeakMap<GraphBuilder, GradOps>();

/** The table's math, reduce and shape emitters bound to `g` (made once per builder). */
export function gradOps(g: GraphBuilder): GradOps {
  let ops = bound.get(g);
  if (!ops) bound.set(g, ops = bindEmitters(g, GRAD_EMITTERS));
  return ops;
}

/** `v` cast to `dtype` where its dtype differs (unchanged where `dtype` is unknown). */
export function castTo(g: GraphBuilder, v: Value, dtype: DType | undefined): Value {
  return dtype === undefined || v.dtype === dtype ? v : gradOps(g).Cast(v, dtype);
}

/** `Op (node name)`, with the domain where it is not the default one. */
export function nodeLabel(node: Pick<NodeRecord, "opType" | "domain" | "name">): string {
  return `${node.domain ? `${node.domain}.` : ""}${node.opType} (node ${node.name})`;
}

/** A one-line error from a gradient rule: the op and node, why, and how to fix it. */
export function gradError(node: NodeRecord, why: string, fix: string): Error {
  return new Error(`autodiff: ${nodeLabel(node)}: ${why}; ${fix}`);
}

/** An integer attribute of the forward node. */
export function intAttr(node: NodeRecord, name: string, fallback: number): number {
  const a = node.attrs[name];
  return a?.type === "int" ? Number(a.value) : fallback;
}

/** A float attribute of the forward node. */
export function floatAttr(node: NodeRecord, name: string, fallback: number): number {
  const a = node.attrs[name];
  return a?.type === "float" ? a.value : fallback;
}

/** The input of the Transpose node that computes `x` with permutation `perm`, if x is one; else undefined. */
export function transposedFrom(g: GraphBuilder, x: Value, perm: readonly number[]): Value | undefined {
  const source = g.producer(x);
  const sourcePerm = source?.opType === "Transpose" ? intsAttr(source, "perm") : undefined;
  const same = sourcePerm?.length === perm.length && sourcePerm.every((p, k) => p === perm[k]);
  return same ? source!.inputs[0] as Value : undefined;
}

/** An ints attribute of the forward node. */
export function intsAttr(node: NodeRecord, name: string): number[] | undefined {
  const a = node.attrs[name];
  return a?.type === "ints" ? a.value.map(Number) : undefined;
}

/** A string attribute of the forward node. */
export function stringAttr(node: NodeRecord, name: string, fallback: string): string {
  const a = node.attrs[name];
  return a?.type === "string" ? a.value : fallback;
}

/** The gradient of the first output (rules of single-output ops are only called when it exists). */
export function outGrad(ctx: GradContext): Value {
  const dy = ctx.grads[0];
  if (!dy) throw gradError(ctx.node, "called without a gradient for output 0", "this is an autodiff bug");
  return dy;
}

/** The dtype gradients of `x` take: its own, else the incoming gradient's. */
export function gradDtype(x: Value, dy: Value): DType {
  return x.dtype ?? dy.dtype ?? "float32";
}

/** `x`'s shape as an int64 vector: a constant when every dim is a number, else a `Shape` node. */
export function shapeValue(g: GraphBuilder, x: Value): Value {
  const dims = x.shape;
  if (dims && dims.every((d) => typeof d === "number")) return trackInts(g.ints(dims as number[]), dims);
  return gradOps(g).Shape(x);
}

/** Zeros with `x`'s shape and the given dtype. */
export function zerosLike(g: GraphBuilder, x: Value, dtype: DType): Value {
  return gradOps(g).ConstantOfShape(shapeValue(g, x), 0, dtype);
}

/**
 * Sums `grad` (shaped like the node's output 0) back to the shape of input `i` of a broadcasting op:
 * over the leading axes the input lacks and the axes where it has size 1. No reduction when every
 * other operand is a scalar or the same value. Throws, naming the node, where the shapes are not
 * tracked well enough to tell which axes were broadcast.
 */
export function reduceTo(ctx: GradContext, grad: Value, i: number): Value {
  const target = ctx.node.inputs[i];
  if (!target) throw gradError(ctx.node, `input ${i} is absent`, "this is an autodiff bug");
  const others = ctx.node.inputs.filter((v, j) => v && j !== i) as Value[];
  if (others.every((v) => v.name === target.name || v.shape?.length === 0)) return grad;
  return sumToShape(ctx.g, grad, ctx.node.outputs[0].shape, target, ctx.node);
}

/**
 * Sums `grad`, whose shape is `from` (entries may be unknown), to `target`'s tracked shape. A
 * target dim of 1 is summed (a no-op where it was not broadcast), any other number is kept (only
 * size-1 dims broadcast), and a symbolic target dim must match `from` exactly, since it might be 1
 * at run time.
 */
export function sumToShape(
  g: GraphBuilder,
  grad: Value,
  from: readonly (Dim | undefined)[] | undefined,
  target: Value,
  node: NodeRecord,
): Value {
  const to = target.shape;
  if (sameShape(to, from as Shape)) return grad;
  const o = gradOps(g);
  if (to && to.every((d) => d === 1)) {
    if (to.length === 0) return o.ReduceSum(grad, undefined, { keepdims: false }); // []
    const total = o.ReduceSum(grad, undefined, { keepdims: true }); // [1, ..., 1] at grad's rank
    return from?.length === to.length ? total : o.Reshape(total, to as number[]); // target's shape
  }
  if (!to || !from) throw untracked(node, target, from);
  const lead = from.length - to.length;
  if (lead < 0) throw untracked(node, target, from);
  const axes: number[] = [];
  for (let k = 0; k < from.length; k++) {
    const [f, t] = [from[k], to[k - lead]];
    if (k < lead || (t === 1 && f !== 1)) axes.push(k);
    else if (t !== f && (typeof t !== "number" || typeof f === "number")) throw untracked(node, target, from);
  }
  if (axes.length === 0) return grad;
  const summed = o.ReduceSum(grad, axes, { keepdims: true }); // grad's rank
  if (lead === 0) return summed;
  return o.Squeeze(summed, Array.from({ length: lead }, (_, k) => k)); // target's shape
}

function untracked(node: NodeRecord, target: Value, from: readonly (Dim | undefined)[] | undefined): Error {
  const show = (
    s: readonly (Dim | undefined)[] | undefined,
  ) => (s ? `[${s.map((d) => d ?? "?").join(", ")}]` : "unknown");
  return gradError(
    node,
    `cannot tell which axes of ${target.name} (shape ${show(target.shape)}) were broadcast to ${show(from)}`,
    "declare graph inputs with dims (numbers or names) and give shape arguments as static lists so shapes are tracked",
  );
}
