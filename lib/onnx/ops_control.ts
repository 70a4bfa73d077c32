/**
 * Op table, control flow: Loop and If. Bodies are built by callbacks on a sub-builder; they may use
 * any value of the enclosing graphs directly (ONNX outer-scope references).
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { check, def } from "./op_def.ts";

/** What a Loop body returns: the next condition (default: unchanged), next carried state, scan outputs. */
export interface LoopStep {
  cond?: Value;
  carried: readonly Value[];
  /** Per-iteration values stacked along a new leading axis in the Loop's scan outputs. */
  scans?: readonly Value[];
}

/** Arguments of Loop. */
export interface LoopArgs {
  /** Maximum trip count (int64 scalar), or a number; omitted = run until `cond` is false. */
  trips?: Value | number | null;
  /** Initial condition (bool scalar); omitted = true. */
  cond?: Value | null;
  /** Initial loop-carried values; each needs a known dtype (the body's inputs are typed from it). */
  carried: readonly Value[];
  /** The body: iteration number (int64 scalar), condition in, carried values in. */
  body: (b: GraphBuilder, iter: Value, cond: Value, carried: readonly Value[]) => LoopStep;
  /** Readable name for the body graph and node. */
  name?: string;
}

/** Results of Loop: the final carried values and the stacked scan outputs. */
export interface LoopResult {
  carried: Value[];
  scans: Value[];
}

/** ONNX Loop: `for (i = 0; i < trips && cond; i++) { cond, carried = body(i, cond, carried) }`. */
function loop(g: GraphBuilder, args: LoopArgs): LoopResult {
  const name = args.name ?? "Loop";
  const b = g.subgraph(`${name}.body`);
  const iter = b.input(b.uniqueName(`${b.name}/iter`), "int64", []);
  const condIn = b.input(b.uniqueName(`${b.name}/cond`), "bool", []);
  const carriedIn = args.carried.map((v, i) => {
    check(v.dtype !== undefined, "Loop", `carried value ${i} (${v.name}) has no known dtype; Cast it first`);
    return b.input(b.uniqueName(`${b.name}/state${i}`), v.dtype);
  });
  const step = args.body(b, iter, condIn, carriedIn);
  check(
    step.carried.length === args.carried.length,
    "Loop",
    "the body must return one value per carried value",
  );
  b.output(step.cond ?? condIn);
  const carriedOut = step.carried.map((v) => b.output(v));
  const scans = (step.scans ?? []).map((v) => b.output(v));
  const trips = typeof args.trips === "number" ? g.scalar(args.trips, "int64") : args.trips ?? null;
  const count = args.carried.length + scans.length;
  const outs = g.opN("Loop", [trips, args.cond ?? null, ...args.carried], count, { body: attr.graph(b) }, {
    name,
    dtype: [...carriedOut, ...scans].map((v) => v.dtype),
  });
  return { carried: outs.slice(0, args.carried.length), scans: outs.slice(args.carried.length) };
}

/** ONNX If: runs one branch; both must return the same number of values with matching dtypes. */
function ifOp(
  g: GraphBuilder,
  cond: Value,
  thenBranch: (b: GraphBuilder) => readonly Value[],
  elseBranch: (b: GraphBuilder) => readonly Value[],
  name = "If",
): Value[] {
  const branch = (label: string, build: (b: GraphBuilder) => readonly Value[]) => {
    const b = g.subgraph(`${name}.${label}`);
    return { b, outs: build(b).map((v) => b.output(v)) };
  };
  const then = branch("then", thenBranch);
  const other = branch("else", elseBranch);
  check(then.outs.length === other.outs.length, "If", "both branches must return the same number of values");
  then.outs.forEach((v, i) => {
    const w = other.outs[i];
    check(
      !v.dtype || !w.dtype || v.dtype === w.dtype,
      "If",
      `output ${i} is ${v.dtype} in one branch, ${w.dtype} in the other`,
    );
  });
  const attrs = { then_branch: attr.graph(then.b), else_branch: attr.graph(other.b) };
  return g.opN("If", [cond], then.outs.length, attrs, {
    name,
    dtype: then.outs.map((v) => v.dtype ?? undefined),
  });
}

/** Control-flow ops. Their gradients, if ever needed, are rules over the bodies; none are planned. */
export const CONTROL_OPS = {
  Loop: def("Loop", loop, { nondiff: [0, 1] }),
  If: def("If", ifOp, { nondiff: [0] }),
};
