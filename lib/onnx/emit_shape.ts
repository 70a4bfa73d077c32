/**
 * Emitters of the shape and indexing family: Reshape, Transpose, Concat, Split, Slice, Pad,
 * Unsqueeze, Squeeze, Expand, Shape, Gather, GatherElements, GatherND, ScatterElements, ScatterND,
 * ConstantOfShape, Range, Trilu. `ops_shape.ts` pairs each with its gradient rule (why the emitters
 * live apart: `emit_math.ts`).
 *
 * Shape-like arguments are static int lists (made constants) or int64 Values (computed shapes);
 * the contents of computed shape vectors are tracked where known (`shape.ts` `trackInts`).
 *
 * @module
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { arrayOf, type DType } from "./dtype.ts";
import { check, intsInput, lift, type Operand } from "./op_def.ts";
import type { Dim } from "./proto.ts";
import {
  axisOf,
  broadcast,
  concatShape,
  gatherShape,
  intsOf,
  numbersOf,
  padShape,
  reshapeShape,
} from "./shape.ts";
import { sliceShape, splitShapes, squeezeShape, trackInts, transposeShape, unsqueezeShape } from "./shape.ts";

type Ints = readonly number[] | Value;

/** Reshape to `shape` (0 copies the input dim unless `allowzero`, -1 is inferred). */
function reshape(g: GraphBuilder, x: Value, shape: Ints, allowzero = false): Value {
  const target = intsOf(shape);
  const tracked = target && !allowzero ? reshapeShape(x.shape, target) : undefined;
  return g.op("Reshape", [x, intsInput(g, shape)], { allowzero: attr.int(allowzero ? 1 : 0) }, {
    shape: tracked,
  });
}

/** Permutes axes (reverses them when `perm` is omitted). */
function transpose(g: GraphBuilder, x: Value, perm?: readonly number[]): Value {
  const attrs = perm ? { perm: attr.ints(perm) } : {};
  return g.op("Transpose", [x], attrs, { shape: transposeShape(x.shape, perm) });
}

/** Joins `xs` along `axis`. */
function concat(g: GraphBuilder, xs: readonly Value[], axis: number): Value {
  check(xs.length > 0, "Concat", "needs at least one input");
  const out = g.op("Concat", xs, { axis: attr.int(axis) }, {
    shape: concatShape(xs.map((x) => x.shape), axis),
  });
  const parts = xs.map((x) => intsOf(x));
  return trackInts(out, parts.every((p) => p) ? (parts as Dim[][]).flat() : undefined);
}

/** Splits along `axis` into pieces of the given sizes, or into `parts` equal pieces. */
function split(g: GraphBuilder, x: Value, sizes: readonly number[] | { parts: number }, axis = 0): Value[] {
  if (Array.isArray(sizes)) {
    const list = sizes as readonly number[];
    const shapes = list.map((n) => withDim(x.shape, axis, n));
    return g.opN("Split", [x, g.ints(list)], list.length, { axis: attr.int(axis) }, { shape: shapes });
  }
  const parts = (sizes as { parts: number }).parts;
  const attrs = { axis: attr.int(axis), num_outputs: attr.int(parts) };
  return g.opN("Split", [x], parts, attrs, { shape: splitShapes(x.shape, axis, parts) });
}

/** Slices `[starts, ends)` on `axes` (default all) with `steps` (default 1). */
function slice(g: GraphBuilder, x: Value, starts: Ints, ends: Ints, axes?: Ints, steps?: Ints): Value {
  const inputs = [x, intsInput(g, starts), intsInput(g, ends)];
  const optional = [
    axes === undefined ? null : intsInput(g, axes),
    steps === undefined ? null : intsInput(g, steps),
  ];
  while (optional.length > 0 && optional[optional.length - 1] === null) optional.pop();
  const [s, e, a, st] = [numbersOf(starts), numbersOf(ends), numbersOf(axes), numbersOf(steps)];
  const known = s && e && (axes === undefined || a) && (steps === undefined || st);
  return g.op("Slice", [...inputs, ...optional], {}, {
    shape: known ? sliceShape(x.shape, s, e, a, st) : undefined,
  });
}

/** Constant-mode Pad: `pads` is `[begins..., ends...]` over `axes` (default all axes). */
function pad(g: GraphBuilder, x: Value, pads: Ints, value: Operand = 0, axes?: Ints): Value {
  const [p, a] = [numbersOf(pads), numbersOf(axes)];
  const shape = p && (axes === undefined || a) ? padShape(x.shape, p, a) : undefined;
  const inputs = [x, intsInput(g, pads), lift(g, value, x), axes === undefined ? null : intsInput(g, axes)];
  return g.op("Pad", inputs, { mode: attr.string("constant") }, { shape });
}

/** Inserts size-1 axes (positions in the output). */
function unsqueeze(g: GraphBuilder, x: Value, axes: Ints): Value {
  const list = numbersOf(axes);
  return g.op("Unsqueeze", [x, intsInput(g, axes)], {}, { shape: list && unsqueezeShape(x.shape, list) });
}

/** Removes size-1 axes. */
function squeeze(g: GraphBuilder, x: Value, axes: Ints): Value {
  const list = numbersOf(axes);
  return g.op("Squeeze", [x, intsInput(g, axes)], {}, { shape: list && squeezeShape(x.shape, list) });
}

/** Broadcasts to `shape` (numpy rules: the result may be larger than `shape`). */
function expand(g: GraphBuilder, x: Value, shape: Ints): Value {
  const list = intsOf(shape);
  return g.op("Expand", [x, intsInput(g, shape)], {}, { shape: list && broadcast(x.shape, list) });
}

/** The shape of `x` as an int64 vector, optionally dims `[start, end)`. */
function shapeOf(g: GraphBuilder, x: Value, start?: number, end?: number): Value {
  const attrs = {
    start: start === undefined ? undefined : attr.int(start),
    end: end === undefined ? undefined : attr.int(end),
  };
  const rank = x.shape?.length;
  const n = rank === undefined ? undefined : sliceLength(rank, start ?? 0, end ?? rank);
  const out = g.op("Shape", [x], attrs, { dtype: "int64", shape: n === undefined ? undefined : [n] });
  return trackInts(
    out,
    x.shape?.slice(clampAxis(x.shape.length, start ?? 0), clampAxis(x.shape.length, end ?? x.shape.length)),
  );
}

/** Rows of `data` along `axis` picked by integer `indices` (embedding lookup). */
function gather(g: GraphBuilder, data: Value, indices: Value, axis = 0): Value {
  const out = g.op("Gather", [data, indices], { axis: attr.int(axis) }, {
    shape: gatherShape(data.shape, indices.shape, axis),
  });
  const [from, at] = [intsOf(data), numbersOf(indices)]; // picking dims out of a tracked shape vector
  const picked = from && at && indices.shape?.length === 1 ? at.map((i) => from.at(i)) : undefined;
  return trackInts(out, picked?.every((d) => d !== undefined) ? picked as Dim[] : undefined);
}

/** `out[i][j] = data[indices[i][j]][j]` for axis 0 (and likewise for other axes). */
function gatherElements(g: GraphBuilder, data: Value, indices: Value, axis = 0): Value {
  return g.op("GatherElements", [data, indices], { axis: attr.int(axis) }, { shape: indices.shape });
}

/** Reductions allowed by the Scatter ops: `add` accumulates duplicate indices. */
export type ScatterReduction = "none" | "add" | "mul" | "max" | "min";

/** Writes `updates` into a copy of `data` at `indices` along `axis`. */
function scatterElements(
  g: GraphBuilder,
  data: Value,
  indices: Value,
  updates: Value,
  o: { axis?: number; reduction?: ScatterReduction } = {},
): Value {
  const attrs = { axis: attr.int(o.axis ?? 0), reduction: attr.string(o.reduction ?? "none") };
  return g.op("ScatterElements", [data, indices, updates], attrs, { shape: data.shape });
}

/** Writes `updates` into a copy of `data` at N-d `indices` (last dim indexes the leading axes). */
function scatterND(
  g: GraphBuilder,
  data: Value,
  indices: Value,
  updates: Value,
  reduction: ScatterReduction = "none",
): Value {
  return g.op("ScatterND", [data, indices, updates], { reduction: attr.string(reduction) }, {
    shape: data.shape,
  });
}

/** Slices of `data` picked by N-d `indices` (the last dim indexes the leading axes); batch_dims 0. */
function gatherND(g: GraphBuilder, data: Value, indices: Value): Value {
  const k = indices.shape?.at(-1);
  const shape = data.shape && indices.shape && typeof k === "number"
    ? [...indices.shape.slice(0, -1), ...data.shape.slice(k)]
    : undefined;
  return g.op("GatherND", [data, indices], {}, { shape });
}

/** A tensor of `shape` filled with `value`. */
function constantOfShape(g: GraphBuilder, shape: Ints, value = 0, dtype: DType = "float32"): Value {
  const data = arrayOf(dtype, [value]);
  const tensor = {
    name: "",
    dtype,
    dims: [1],
    raw: new Uint8Array(data.buffer, data.byteOffset, data.byteLength),
  };
  return g.op("ConstantOfShape", [intsInput(g, shape)], { value: attr.tensor(tensor) }, {
    dtype,
    shape: intsOf(shape),
  });
}

/** `[start, start + delta, …)` below `limit`; all three scalars of one dtype. */
function range(g: GraphBuilder, start: Operand, limit: Operand, delta: Operand = 1): Value {
  const like = [start, limit, delta].find((x) => typeof x !== "number");
  const dtype = (typeof like === "object" ? like.dtype : undefined) ?? "int64";
  const asValue = (x: Operand) => (typeof x === "number" ? g.scalar(x, dtype) : x);
  return g.op("Range", [asValue(start), asValue(limit), asValue(delta)], {}, { dtype, shape: undefined });
}

/** Upper (default) or lower triangle of the last two dims, shifted by diagonal `k`. */
function trilu(g: GraphBuilder, x: Value, upper = true, k: number | Value = 0): Value {
  const kIn = typeof k === "number" ? (k === 0 ? null : g.scalar(k, "int64")) : k;
  return g.op("Trilu", [x, kIn], { upper: attr.int(upper ? 1 : 0) }, { shape: x.shape });
}

function withDim(shape: Value["shape"], axis: number, n: number): Value["shape"] {
  if (!shape) return undefined;
  const out = [...shape];
  out[axisOf(axis, shape.length)] = n;
  return out;
}

function sliceLength(rank: number, start: number, end: number): number {
  return Math.max(0, clampAxis(rank, end) - clampAxis(rank, start));
}

function clampAxis(rank: number, a: number): number {
  return Math.min(rank, Math.max(0, a < 0 ? a + rank : a));
}

/** Shape and indexing ops, keyed by ONNX op type. */
export const SHAPE_EMITTERS = {
  Reshape: reshape,
  Transpose: transpose,
  Concat: concat,
  Split: split,
  Slice: slice,
  Pad: pad,
  Unsqueeze: unsqueeze,
  Squeeze: squeeze,
  Expand: expand,
  Shape: shapeOf,
  Gather: gather,
  GatherElements: gatherElements,
  GatherND: gatherND,
  ScatterElements: scatterElements,
  ScatterND: scatterND,
  ConstantOfShape: constantOfShape,
  Range: range,
  Trilu: trilu,
};
