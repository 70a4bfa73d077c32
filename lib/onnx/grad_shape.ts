/**
 * Gradient rules of the indexing ops whose rules are longer than their emitters: Concat, Slice,
 * Pad and Gather (the entries in `ops_shape.ts` point here).
 *
 * Integer arithmetic on dims runs at build time where the dims are known and as tiny int64 ops
 * otherwise (`IntExpr`), so graphs with symbolic batch and sequence dims get the same rules.
 */

import type { GraphBuilder, NodeRecord, Value } from "./builder.ts";
import { gradDtype, gradError, gradOps, intAttr, outGrad, zerosLike } from "./grad_util.ts";
import type { GradContext } from "./op_def.ts";
import { axisOf, numbersOf, sliceCount } from "./shape.ts";

/** A build-time integer, or a 1-element int64 value computed at run time. */
type IntExpr = number | Value;

function asValue(g: GraphBuilder, x: IntExpr): Value {
  return typeof x === "number" ? g.ints([x]) : x;
}

function add(g: GraphBuilder, a: IntExpr, b: IntExpr): IntExpr {
  if (typeof a === "number" && typeof b === "number") return a + b;
  return gradOps(g).Add(asValue(g, a), asValue(g, b));
}

function sub(g: GraphBuilder, a: IntExpr, b: IntExpr): IntExpr {
  if (typeof a === "number" && typeof b === "number") return a - b;
  return gradOps(g).Sub(asValue(g, a), asValue(g, b));
}

/** Several IntExprs as one int64 vector: a static list when all are known. */
function intList(g: GraphBuilder, xs: readonly IntExpr[]): number[] | Value {
  if (xs.every((x) => typeof x === "number")) return xs as number[];
  return gradOps(g).Concat(xs.map((x) => asValue(g, x)), 0);
}

/** Size of `x` along `axis`: known, or read with `Shape` at run time. */
function dimOf(g: GraphBuilder, x: Value, axis: number): IntExpr {
  const d = x.shape?.[axisOf(axis, x.shape.length)];
  if (typeof d === "number") return d;
  return gradOps(g).Shape(x, axis, axis === -1 ? undefined : axis + 1); // [1]
}

/** Concat: each input gets its stretch of `dy` along the axis. */
export function concatGrad(ctx: GradContext): (Value | null)[] {
  const { g, node, wants } = ctx;
  const o = gradOps(g);
  const dy = outGrad(ctx);
  const axis = intAttr(node, "axis", 0);
  const xs = node.inputs as Value[];
  const sizes = xs.map((x) => dimOf(g, x, axis));
  if (sizes.every((s) => typeof s === "number")) {
    return o.Split(dy, sizes as number[], axis).map((part, i) => (wants[i] ? part : null));
  }
  let start: IntExpr = 0;
  return xs.map((_, i) => {
    const end = add(g, start, sizes[i]);
    const part = wants[i] ? o.Slice(dy, intList(g, [start]), intList(g, [end]), [axis]) : null;
    start = end;
    return part;
  });
}

/**
 * Slice with static starts, ends, axes and positive steps: `dy` is put back in place with zeros
 * around it (Pad); a step s > 1 first spreads `dy` out with s - 1 zeros after each entry.
 */
export function sliceGrad(ctx: GradContext): (Value | null)[] {
  const { g, node } = ctx;
  const [x, startsIn, endsIn, axesIn, stepsIn] = node.inputs as (Value | null)[];
  const starts = numbersOf(startsIn);
  const ends = numbersOf(endsIn);
  const axes = axesIn ? numbersOf(axesIn) : starts?.map((_, i) => i);
  const steps = stepsIn ? numbersOf(stepsIn) : starts?.map(() => 1);
  if (!x || !starts || !ends || !axes || !steps) {
    throw gradError(node, "starts, ends, axes and steps are not known at build time", "pass them as lists");
  }
  if (steps.some((s) => s <= 0)) {
    throw gradError(
      node,
      `steps ${JSON.stringify(steps)} include one ≤ 0`,
      "use positive steps on paths to the loss",
    );
  }
  let dx = outGrad(ctx);
  const before: IntExpr[] = [];
  const after: IntExpr[] = [];
  axes.forEach((axis, i) => {
    const dim = dimOf(g, x, axis);
    const start = clampedStart(g, starts[i], dim);
    if (steps[i] > 1) dx = spread(g, dx, axis, steps[i], node);
    const len = typeof dim === "number"
      ? sliceCount(dim, starts[i], ends[i], steps[i]) * steps[i]
      : dimOf(g, dx, axis);
    before.push(start);
    after.push(sub(g, sub(g, dim, start), len)); // negative when spreading ran past the end: Pad trims
  });
  const padded = gradOps(g).Pad(dx, intList(g, [...before, ...after]), 0, axes); // x's shape
  return [padded, null, null, null, null];
}

/** Where a positive-step slice starts on an axis of size `dim` (ONNX clamping). */
function clampedStart(g: GraphBuilder, start: number, dim: IntExpr): IntExpr {
  if (typeof dim === "number") return Math.min(dim, Math.max(0, start < 0 ? start + dim : start));
  const o = gradOps(g);
  if (start >= 0) return o.Min(g.ints([start]), dim);
  return o.Max(o.Add(g.ints([start]), dim), g.ints([0]));
}

/** `[..., n, ...]` → `[..., n·step, ...]` along `axis`, each entry followed by `step - 1` zeros. */
function spread(g: GraphBuilder, dx: Value, axis: number, step: number, node: NodeRecord): Value {
  const rank = node.inputs[0]?.shape?.length;
  if (rank === undefined) throw gradError(node, `a step of ${step} needs the input's rank`, "give it dims");
  const a = axisOf(axis, rank);
  const o = gradOps(g);
  const grid = o.Pad(o.Unsqueeze(dx, [a + 1]), [0, step - 1], 0, [a + 1]); // [..., n, step, ...]
  const parts = [
    ...(a > 0 ? [o.Shape(dx, 0, a)] : []),
    g.ints([-1]),
    ...(a + 1 < rank ? [o.Shape(dx, a + 1)] : []),
  ];
  return o.Reshape(grid, o.Concat(parts, 0)); // [..., n·step, ...]
}

/** Pad (constant mode, non-negative static pads): the gradient is the un-padded window of `dy`. */
export function padGrad(ctx: GradContext): (Value | null)[] {
  const { g, node } = ctx;
  const [x, padsIn, , axesIn] = node.inputs as (Value | null)[];
  const pads = numbersOf(padsIn);
  const axes = axesIn ? numbersOf(axesIn) : x?.shape?.map((_, i) => i);
  if (!pads || !axes || pads.some((p) => p < 0)) {
    throw gradError(
      node,
      "pads must be static and non-negative (and axes known)",
      "pass pads and axes as lists",
    );
  }
  const n = axes.length;
  const ends = pads.slice(n).map((p) => (p > 0 ? -p : 2 ** 62));
  return [gradOps(g).Slice(outGrad(ctx), pads.slice(0, n), ends, axes), null, null, null];
}

/**
 * Gather along `axis`: rows of `dy` are added into zeros at their indices (ScatterND with
 * reduction add, so repeated indices accumulate). The axis is moved to the front for the scatter.
 */
export function gatherGrad(ctx: GradContext): (Value | null)[] {
  const { g, node } = ctx;
  const o = gradOps(g);
  const [data, indices] = node.inputs as Value[];
  const r = data.shape?.length;
  const q = indices.shape?.length;
  if (r === undefined || q === undefined) {
    throw gradError(node, "the ranks of data and indices are not tracked", "give both dims");
  }
  const a = axisOf(intAttr(node, "axis", 0), r);
  const dy = outGrad(ctx);
  const dtype = gradDtype(data, dy);
  const ids = o.Unsqueeze(indices, [-1]); // [...idx, 1]
  if (a === 0) return [o.ScatterND(zerosLike(g, data, dtype), ids, dy, "add"), null];
  const range = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => from + i);
  const front = o.Transpose(dy, [...range(a, a + q), ...range(0, a), ...range(a + q, r + q - 1)]); // [idx, pre, post]
  const order = [a, ...range(0, r).filter((k) => k !== a)];
  const dims = data.shape!;
  const moved = dims.every((d) => typeof d === "number")
    ? order.map((k) => dims[k] as number)
    : o.Gather(o.Shape(data), g.ints(order)); // [r]
  const zeros = o.ConstantOfShape(moved, 0, dtype); // [n, pre, post]
  const scattered = o.ScatterND(zeros, ids, front, "add"); // [n, pre, post]
  return [o.Transpose(scattered, [...range(1, a + 1), 0, ...range(a + 1, r)]), null];
}
