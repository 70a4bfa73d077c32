/**
 * The op table: one entry per ONNX op type, each with its typed emitter and its gradient rule side
 * by side. Entries live in `ops_*.ts` by family (their emitters in `emit_*.ts`, see `emit_math.ts`
 * for why). The reverse walk is `autodiff.ts`, which reads this table; this file does not import it
 * back, so the two stay out of a cycle.
 *
 * ```ts
 * import { GraphBuilder } from "./builder.ts";
 * import { bindOps } from "./ops.ts";
 * const g = new GraphBuilder("demo");
 * const o = bindOps(g);
 * const x = g.input("x", "float32", ["B", 4]);   // [B, 4]
 * const y = o.Softmax(o.Mul(x, 2));              // [B, 4]
 * g.output(y, "y");
 * ```
 */

import type { GraphBuilder, NodeRecord } from "./builder.ts";
import type { Bound, OpDef } from "./op_def.ts";
import { CONTRIB_OPS } from "./ops_contrib.ts";
import { CONTROL_OPS } from "./ops_control.ts";
import { ELEMENTWISE_OPS, MATH_OPS } from "./ops_math.ts";
import { NORM_OPS } from "./ops_norm.ts";
import { REDUCE_OPS } from "./ops_reduce.ts";
import { SHAPE_OPS } from "./ops_shape.ts";

export type { Emit, GradContext, GradRule, OpDef, Operand } from "./op_def.ts";

/** Every op, keyed by ONNX op type. */
export const OPS = {
  ...ELEMENTWISE_OPS,
  ...MATH_OPS,
  ...REDUCE_OPS,
  ...SHAPE_OPS,
  ...CONTROL_OPS,
  ...CONTRIB_OPS,
  ...NORM_OPS,
};

/** An op type the table knows. */
export type OpType = keyof typeof OPS;

/** The entry for a recorded node; throws, naming the op, when the table has none. */
export function opDefOf(node: Pick<NodeRecord, "opType" | "domain">): OpDef {
  const entry = (OPS as Record<string, OpDef>)[node.opType];
  if (!entry || entry.domain !== node.domain) {
    const where = node.domain ? `${node.domain}.${node.opType}` : node.opType;
    throw new Error(`op table: no entry for ${where}; add one in lib/onnx/ops_*.ts`);
  }
  return entry;
}

/** All emitters bound to one builder: `o.MatMul(a, b)` instead of `OPS.MatMul.emit(g, a, b)`. */
export type BoundOps = { readonly [K in OpType]: Bound<(typeof OPS)[K]["emit"]> };

/** Binds every emitter of the table to `g`. */
export function bindOps(g: GraphBuilder): BoundOps {
  const bound: Record<string, unknown> = {};
  for (const [name, entry] of Object.entries(OPS) as [string, OpDef][]) {
    bound[name] = (...args: unknown[]) => entry.emit(g, ...args);
  }
  return bound as BoundOps;
}
