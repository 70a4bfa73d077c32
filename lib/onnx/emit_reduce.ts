/**
 * Emitters of the reduce family: ReduceSum / Mean / Max / Min / LogSumExp (axes as an input, as
 * opset 18+ wants), ArgMax, TopK, CumSum. `ops_reduce.ts` pairs each with its gradient rule (why
 * the emitters live apart: `emit_math.ts`).
 *
 * @module
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { check, intsInput } from "./op_def.ts";
import { axisOf, numbersOf, reduceShape } from "./shape.ts";

/** Options of the Reduce ops. */
export interface ReduceOptions {
  /** Keep reduced axes as size 1 (ONNX default: true). */
  keepdims?: boolean;
}

/** A Reduce op over `axes` (static list or int64 Value; all axes when omitted). */
function reduce(opType: string) {
  return (g: GraphBuilder, x: Value, axes?: readonly number[] | Value, o: ReduceOptions = {}) => {
    const keepdims = o.keepdims ?? true;
    const axesIn = axes === undefined ? null : intsInput(g, axes);
    const shape = reduceShape(x.shape, axes === undefined ? [] : numbersOf(axes), keepdims);
    return g.op(opType, [x, axesIn], { keepdims: attr.int(keepdims ? 1 : 0) }, { shape }) as Value;
  };
}

/** Options of ArgMax. */
export interface ArgMaxOptions {
  keepdims?: boolean;
  /** Pick the last of equal maxima instead of the first. */
  selectLastIndex?: boolean;
}

/** Index of the maximum along `axis` (int64). */
function argMax(g: GraphBuilder, x: Value, axis: number, o: ArgMaxOptions = {}): Value {
  const keepdims = o.keepdims ?? true;
  const attrs = {
    axis: attr.int(axis),
    keepdims: attr.int(keepdims ? 1 : 0),
    select_last_index: attr.int(o.selectLastIndex ? 1 : 0),
  };
  return g.op("ArgMax", [x], attrs, { dtype: "int64", shape: reduceShape(x.shape, [axis], keepdims) });
}

/** Options of TopK. */
export interface TopKOptions {
  axis?: number;
  /** Largest (default) or smallest k. */
  largest?: boolean;
  sorted?: boolean;
}

/** The k largest (or smallest) entries along `axis`: `[values, indices]`. */
function topK(g: GraphBuilder, x: Value, k: number | Value, o: TopKOptions = {}): [Value, Value] {
  const axis = o.axis ?? -1;
  const kIn = typeof k === "number" ? g.ints([k]) : k;
  let shape = x.shape ? [...x.shape] : undefined;
  if (shape) shape[axisOf(axis, shape.length)] = typeof k === "number" ? k : "";
  if (shape?.includes("")) shape = undefined;
  const attrs = {
    axis: attr.int(axis),
    largest: attr.int(o.largest === false ? 0 : 1),
    sorted: attr.int(o.sorted === false ? 0 : 1),
  };
  const [values, indices] = g.opN("TopK", [x, kIn], 2, attrs, {
    dtype: [x.dtype, "int64"],
    shape: [shape, shape],
  });
  return [values, indices];
}

/** Options of CumSum. */
export interface CumSumOptions {
  /** Exclude the current element (sum of the ones before it). */
  exclusive?: boolean;
  /** Sum from the end. */
  reverse?: boolean;
}

/** Cumulative sum along `axis`. */
function cumSum(g: GraphBuilder, x: Value, axis: number | Value, o: CumSumOptions = {}): Value {
  const axisIn = typeof axis === "number" ? g.scalar(axis, "int64") : axis;
  check(
    axisIn.dtype === undefined || axisIn.dtype === "int64" || axisIn.dtype === "int32",
    "CumSum",
    "axis must be int",
  );
  const attrs = { exclusive: attr.int(o.exclusive ? 1 : 0), reverse: attr.int(o.reverse ? 1 : 0) };
  return g.op("CumSum", [x, axisIn], attrs, { shape: x.shape });
}

/** Reductions and scans, keyed by ONNX op type. */
export const REDUCE_EMITTERS = {
  ReduceSum: reduce("ReduceSum"),
  ReduceMean: reduce("ReduceMean"),
  ReduceMax: reduce("ReduceMax"),
  ReduceMin: reduce("ReduceMin"),
  ReduceLogSumExp: reduce("ReduceLogSumExp"),
  ArgMax: argMax,
  TopK: topK,
  CumSum: cumSum,
};
