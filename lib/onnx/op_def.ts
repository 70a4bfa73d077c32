/**
 * The shape of an op table entry: a typed emitter and, beside it, the op's gradient rule.
 *
 * Emitters take the builder first, then typed operands and options, check what they can (attribute
 * values, input counts) and call `g.op`; they live in `emit_*.ts`. Gradient rules sit beside the
 * entries in `ops_*.ts`, which pair each emitter with its rule (`pairRules`); the reverse walk
 * (`autodiff.ts`) looks a node's rule up by op type and throws, naming the op, where it is missing.
 *
 * This file imports neither emitters nor tables: every other file of the op table builds on it.
 *
 * @module
 */

import type { GraphBuilder, NodeRecord, Value } from "./builder.ts";
import type { DType } from "./dtype.ts";
import { trackInts } from "./shape.ts";

/** What a gradient rule sees: the forward node and the gradients flowing into its outputs. */
export interface GradContext {
  /** The builder that receives the backward nodes (the same graph as the forward pass). */
  readonly g: GraphBuilder;
  /** The forward node: its input and output Values (usable in the backward graph) and attributes. */
  readonly node: NodeRecord;
  /** dLoss/d(output i), or `null` where output i does not reach the loss. At least one is non-null. */
  readonly grads: readonly (Value | null)[];
  /** Whether input i needs a gradient (frozen weights, indices and shapes do not): skip the work. */
  readonly wants: readonly boolean[];
  /**
   * Whether rules may read the optional statistics outputs of fused norms (`inv_std_var`): the CPU
   * provider writes them, WebGPU's kernels do not (`BackwardOptions.readsNormStats`).
   */
  readonly readsNormStats?: boolean;
}

/**
 * A gradient rule: returns dLoss/d(input i) for each input, `null` where not wanted or not
 * differentiable. Each returned gradient has its input's shape: rules of broadcasting ops reduce
 * over the broadcast axes (see `compose.ts` `unbroadcast`) and use only ops of this table.
 */
export type GradRule = (ctx: GradContext) => (Value | null)[];

/** An emitter: builder first, then the op's operands and options. */
// deno-lint-ignore no-explicit-any
export type Emit = (g: GraphBuilder, ...args: any[]) => any;

/** One op table entry, keyed in the table by `opType`. */
export interface OpDef<E extends Emit = Emit> {
  readonly opType: string;
  /** `""` for the default ONNX domain, or e.g. `"com.microsoft"`. */
  readonly domain: string;
  /** Typed emitter. */
  readonly emit: E;
  /** Gradient rule, beside the emitter; absent for ops without float gradients and for Loop, If, contrib ops. */
  readonly grad?: GradRule;
  /** Inputs no gradient ever flows through (indices, shapes, axes, conditions), by position. */
  readonly nondiff?: readonly number[];
}

/** Builds a default-domain entry. */
export function def<E extends Emit>(
  opType: string,
  emit: E,
  extra: { grad?: GradRule; nondiff?: readonly number[]; domain?: string } = {},
): OpDef<E> {
  return { opType, domain: extra.domain ?? "", emit, grad: extra.grad, nondiff: extra.nondiff };
}

/** A tensor operand: a Value, or a plain number made a scalar constant of the other operand's dtype. */
export type Operand = Value | number;

/** Turns an operand into a Value; numbers take `like`'s dtype (float32 when unknown). */
export function lift(g: GraphBuilder, x: Operand, like?: Operand): Value {
  if (typeof x !== "number") return x;
  const dtype: DType = (typeof like === "object" ? like.dtype : undefined) ?? "float32";
  return g.scalar(x, dtype);
}

/** A static int64 list becomes a constant (its contents tracked); a Value is used as given. */
export function intsInput(g: GraphBuilder, x: readonly number[] | Value): Value {
  if (!Array.isArray(x)) return x as Value;
  return trackInts(g.ints(x as readonly number[]), x as readonly number[]);
}

/** The static list, when `x` is one. */
export function staticInts(x: readonly number[] | Value | undefined): readonly number[] | undefined {
  return Array.isArray(x) ? x as readonly number[] : undefined;
}

/** An emitter with the builder argument bound. */
export type Bound<E extends Emit> = E extends (g: GraphBuilder, ...args: infer A) => infer R
  ? (...args: A) => R
  : never;

/** Every emitter of an emitter table, bound to one builder. */
export type BoundEmitters<T extends Record<string, Emit>> = { readonly [K in keyof T]: Bound<T[K]> };

/** Binds every emitter of `emitters` to `g` (the op table's `bindOps` does this for the whole table). */
export function bindEmitters<T extends Record<string, Emit>>(g: GraphBuilder, emitters: T): BoundEmitters<T> {
  const bound: Record<string, unknown> = {};
  for (const [name, emit] of Object.entries(emitters)) {
    bound[name] = (...args: unknown[]) => emit(g, ...args);
  }
  return bound as BoundEmitters<T>;
}

/** What a table entry adds to its emitter: the gradient rule, and the inputs no gradient flows through. */
export interface GradSpec {
  readonly grad?: GradRule;
  readonly nondiff?: readonly number[];
}

/**
 * A family's table: every emitter of `emitters` (keyed by ONNX op type) paired with its entry of
 * `rules`. `rules` must name every op of the family, so an emitter cannot be added without saying
 * what its gradient is (a rule, or the inputs that carry none).
 */
export function pairRules<E extends Record<string, Emit>>(
  emitters: E,
  rules: { readonly [K in keyof E]: GradSpec },
): { readonly [K in keyof E]: OpDef<E[K]> } {
  const table: Record<string, OpDef> = {};
  for (const [opType, emit] of Object.entries(emitters)) table[opType] = def(opType, emit, rules[opType]);
  return table as { readonly [K in keyof E]: OpDef<E[K]> };
}

/** Throws a one-line error naming the op when a check fails. */
export function check(condition: boolean, op: string, message: string): asserts condition {
  if (!condition) throw new Error(`${op}: ${message}`);
}
