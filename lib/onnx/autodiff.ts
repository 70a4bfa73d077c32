/**
 * Reverse-mode automatic differentiation over the op table: only the reverse walk. Every op's
 * gradient rule sits beside its emitter (`ops_*.ts`); this file finds the nodes between the
 * parameters and the loss, calls their rules in reverse order and adds up the gradients of values
 * used more than once.
 *
 * ```ts
 * import { backward } from "./autodiff.ts";
 * import { GraphBuilder } from "./builder.ts";
 * import { OPS } from "./ops.ts";
 * const g = new GraphBuilder("train");
 * const x = g.input("x", "float32", ["B", 4]);                      // [B, 4]
 * const w = g.input("w", "float32", [4, 3]);                        // [4, 3]
 * const loss = OPS.ReduceSum.emit(g, OPS.MatMul.emit(g, x, w));     // [1, 1]
 * const [dw] = backward(g, [{ value: loss, grad: g.constant(new Float32Array([1]), [1, 1]) }], [w]);
 * g.output(dw!, "grad_w");                                          // [4, 3]
 * ```
 */

import type { GraphBuilder, NodeRecord, Value } from "./builder.ts";
import { type GradRegion, gradRegionsByNode } from "./grad_region.ts";
import { nodeLabel } from "./grad_util.ts";
import type { GradRule, OpDef } from "./op_def.ts";
import { OPS } from "./ops.ts";
import type { GraphData } from "./proto.ts";

/** Options of `backward`. */
export interface BackwardOptions {
  sum?: "Sum" | "Add";
  /** Rules may read fused norms' statistics outputs (`GradContext.readsNormStats`; default false). */
  readsNormStats?: boolean;
}

/** A seed: `grad` is dLoss/d`value` (e.g. ones for the loss itself), with `value`'s shape. */
export interface Seed {
  readonly value: Value;
  readonly grad: Value;
}

/**
 * Emits the backward pass into `g` and returns dLoss/d(each of `wrt`): `null` where no gradient
 * flows (no path to a seed, or only through inputs without gradient such as indices and shapes).
 * Gradients from several seeds add up. Only nodes on a path from some `wrt` to some seed are
 * visited; a rule is told which inputs need gradients (`wants`), so frozen weights get no nodes.
 * Throws, naming the op and node, where a node on such a path has no gradient rule.
 * `options.sum`: how contributions to one value are added, one `Sum` node (default) or a chain of `Add`s
 * (for a provider without a Sum kernel; the same additions in the same order).
 */
export function backward(
  g: GraphBuilder,
  seeds: readonly Seed[],
  wrt: readonly Value[],
  options: BackwardOptions = {},
): (Value | null)[] {
  const forward = g.nodes.slice(); // the walk must not see the nodes it adds
  const live = dependents(forward, wrt);
  const acc = new Accumulator(g, options.sum ?? "Sum", forward.length);
  for (const seed of seeds) if (live.has(seed.value.name)) acc.add(seed.value, seed.grad);
  const regions = gradRegionsByNode(g);
  const index = new Map(forward.map((n, i) => [n, i]));
  for (let k = forward.length - 1; k >= 0; k--) {
    const node = forward[k];
    const region = regions.get(node);
    if (region) {
      // The region's rule runs once, at its last node; its other nodes have no rule of their own here.
      if (k === Math.max(...region.nodes.map((n) => index.get(n) ?? -1))) {
        walkRegion({ g, acc, live, region, node, after: (v) => (index.get(g.producer(v)!) ?? -1) > k });
      }
      continue;
    }
    const grads = node.outputs.map((v) => acc.total(v));
    if (grads.every((d) => d === null)) continue;
    const entry = entryOf(node);
    const wants = node.inputs.map((v, i) => v !== null && !entry?.nondiff?.includes(i) && live.has(v.name));
    if (!wants.some((w) => w) && !capturesLive(node, live)) continue;
    const rule = ruleOf(node, entry);
    const dx = g.scope(
      `${node.name}.grad`,
      () => rule({ g, node, grads, wants, readsNormStats: options.readsNormStats }),
    );
    node.inputs.forEach((v, i) => {
      if (v && wants[i] && dx[i]) acc.add(v, dx[i]!);
    });
  }
  return wrt.map((v) => acc.total(v));
}

/**
 * A gradient region's step (grad_region.ts): its rule, given its outputs' gradients, adds its inputs'.
 * `after(v)`: whether v is computed after the region (its gradient complete, for `gradOf`).
 */
function walkRegion(
  w: {
    g: GraphBuilder;
    acc: Accumulator;
    live: ReadonlySet<string>;
    region: GradRegion;
    node: NodeRecord;
    after: (v: Value) => boolean;
  },
): void {
  const { g, acc, live, region, node } = w;
  for (const inner of region.nodes.flatMap((n) => n.outputs)) {
    if (!region.outputs.includes(inner) && acc.total(inner)) {
      throw new Error(
        `autodiff: ${inner.name} lies inside a gradient region (ending at ${
          nodeLabel(node)
        }) but a gradient ` +
          "reaches it from outside: read only the region's outputs",
      );
    }
  }
  const grads = region.outputs.map((v) => acc.total(v));
  const wants = region.inputs.map((v) => live.has(v.name));
  if (grads.every((d) => d === null) || !wants.some((x) => x)) return;
  const gradOf = (v: Value) => {
    if (!g.producer(v) || !w.after(v)) {
      throw new Error(
        `autodiff: a region's rule read the gradient of ${v.name}, which is not computed after it`,
      );
    }
    return acc.total(v);
  };
  const dx = g.scope(`${node.name}.grad`, () => region.grad({ g, grads, wants, gradOf }));
  region.inputs.forEach((v, i) => {
    if (wants[i] && dx[i]) acc.add(v, dx[i]!);
  });
}

/** Names of the values that depend on some `wrt` through inputs that carry gradients. */
function dependents(nodes: readonly NodeRecord[], wrt: readonly Value[]): Set<string> {
  const live = new Set(wrt.map((v) => v.name));
  for (const node of nodes) {
    if (node.stopsGradient) continue; // detach: its outputs are constants to the walk
    const nondiff = entryOf(node)?.nondiff ?? [];
    const reached = node.inputs.some((v, i) => v && !nondiff.includes(i) && live.has(v.name)) ||
      capturesLive(node, live);
    if (!reached) continue;
    for (const out of node.outputs) if (mayCarryGradient(out)) live.add(out.name);
  }
  return live;
}

/** Integer and bool values carry no gradient; an unknown dtype might. */
function mayCarryGradient(v: Value): boolean {
  return v.dtype === undefined || v.dtype.startsWith("float") || v.dtype === "bfloat16";
}

/** Whether a Loop or If body reads a live value of an enclosing graph (not listed as an input). */
function capturesLive(node: NodeRecord, live: ReadonlySet<string>): boolean {
  return Object.values(node.attrs).some((a) => a.type === "graph" && graphReads(a.value, live));
}

function graphReads(graph: GraphData, names: ReadonlySet<string>): boolean {
  return graph.nodes.some((n) =>
    n.inputs.some((name) => names.has(name)) ||
    Object.values(n.attrs ?? {}).some((a) => a.type === "graph" && graphReads(a.value, names))
  );
}

function entryOf(node: NodeRecord): OpDef | undefined {
  const entry = (OPS as Record<string, OpDef>)[node.opType];
  return entry && entry.domain === node.domain ? entry : undefined;
}

function ruleOf(node: NodeRecord, entry: OpDef | undefined): GradRule {
  if (entry?.grad) return entry.grad;
  const why = entry ? "" : " (the op table has no entry for it)";
  throw new Error(
    `autodiff: no gradient rule for ${
      nodeLabel(node)
    }${why}; it lies on a path from a parameter to the loss: ` +
      "build that part from ops with rules (e.g. compose.ts attention instead of fused contrib ops, no Loop/If), " +
      "or feed it from values that need no gradient",
  );
}

/**
 * Gradient contributions per value, summed once (one Sum node, or a chain of Adds) when first read. Two
 * contributions of which one is a Gemm this walk emitted (a Linear's `dX = dY · W`) are added by that
 * Gemm itself, the other one as its C input: `dY · W + dU · A` of a LoRA Linear is one kernel, not three.
 */
class Accumulator {
  private readonly parts = new Map<string, Value[]>();
  private readonly totals = new Map<string, Value>();

  /** `walkStart`: the index of the first node the walk emits (nodes before it are the forward's). */
  constructor(
    private readonly g: GraphBuilder,
    private readonly sum: "Sum" | "Add",
    private readonly walkStart: number,
  ) {}

  add(v: Value, grad: Value): void {
    if (this.totals.has(v.name)) throw new Error(`autodiff: gradient of ${v.name} added after it was read`);
    const list = this.parts.get(v.name) ?? [];
    list.push(grad);
    this.parts.set(v.name, list);
  }

  total(v: Value): Value | null {
    const done = this.totals.get(v.name);
    if (done) return done;
    const list = this.parts.get(v.name);
    if (!list) return null;
    const sum = list.length === 1 ? list[0] : this.g.scope(`${v.name}.grad`, () => this.#add(list));
    this.totals.set(v.name, sum);
    return sum;
  }

  #add(list: readonly Value[]): Value {
    const folded = list.length === 2
      ? this.#intoGemm(list[0], list[1]) ?? this.#intoGemm(list[1], list[0])
      : null;
    if (folded) return folded;
    if (this.sum === "Sum") return OPS.Sum.emit(this.g, ...list);
    return list.slice(1).reduce((total, part) => OPS.Add.emit(this.g, total, part), list[0]);
  }

  /**
   * `part + other` as `part`'s Gemm with `other` as its C input, where `part` comes from a Gemm this walk
   * emitted without C (beta 1), computed after `other`, of the same shape, and read by nothing else (it
   * then holds the sum); null otherwise.
   */
  #intoGemm(part: Value, other: Value): Value | null {
    const { g } = this;
    const gemm = g.producer(part);
    if (!gemm || gemm.opType !== "Gemm" || gemm.domain !== "" || (gemm.inputs[2] ?? null) !== null) {
      return null;
    }
    const beta = gemm.attrs.beta;
    if (beta && !(beta.type === "float" && beta.value === 1)) return null;
    const at = g.nodes.indexOf(gemm);
    const source = g.producer(other);
    if (at < this.walkStart || (source && g.nodes.indexOf(source) > at)) return null;
    if (!part.shape || !other.shape || !sameDims(part.shape, other.shape)) return null;
    if (this.#readElsewhere(part)) return null;
    g.setInput(gemm, 2, other);
    return part;
  }

  /** Whether `v` is read by a node, held as a total, or listed as a contribution more than once. */
  #readElsewhere(v: Value): boolean {
    if (this.g.nodes.some((n) => n.inputs.some((x) => x?.name === v.name))) return true;
    if ([...this.totals.values()].some((t) => t.name === v.name)) return true;
    let listed = 0;
    for (const list of this.parts.values()) listed += list.filter((x) => x.name === v.name).length;
    return listed > 1;
  }
}

function sameDims(a: readonly (number | string)[], b: readonly (number | string)[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
