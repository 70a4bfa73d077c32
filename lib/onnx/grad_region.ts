/**
 * Gradient regions: a span of forward nodes that autodiff differentiates as one function, with a rule
 * written for the whole span instead of each node's own (a composite op's hand-written backward, as a
 * `torch.autograd.Function`). The one user is attention's softmax (compose.ts): its gradient
 * `P · (dP − Σ dP·P)` needs the row sums of `dP · P` over the keys, which equal the row sums of `dO · O`
 * over the head dim (O = P·V is the attention's output), a far smaller product, and in float16 needs no
 * Cast either way (the span's own rules would widen dP and narrow the result).
 *
 * The region's rule runs where the walk reaches the span's last node; values computed inside the span
 * other than its outputs must not be read outside it (autodiff throws where a gradient reaches one).
 *
 * @module
 */

import type { GraphBuilder, NodeRecord, Value } from "./builder.ts";

/** What a region's rule sees. */
export interface RegionGradContext {
  readonly g: GraphBuilder;
  /** dLoss/d(each of the region's outputs), `null` where one does not reach the loss. */
  readonly grads: readonly (Value | null)[];
  /** Whether each of the region's inputs needs a gradient. */
  readonly wants: readonly boolean[];
  /**
   * dLoss/d`v` for a value computed after the region (every node that reads it has been walked, so its
   * gradient is complete); throws for a value computed before or inside it.
   */
  gradOf(v: Value): Value | null;
}

/** A span of forward nodes with one gradient rule. */
export interface GradRegion {
  readonly nodes: readonly NodeRecord[];
  readonly inputs: readonly Value[];
  readonly outputs: readonly Value[];
  /** dLoss/d(each input), `null` where not wanted. */
  readonly grad: (ctx: RegionGradContext) => (Value | null)[];
}

const REGIONS = new WeakMap<GraphBuilder, GradRegion[]>();

/** Records `region` in `g`: autodiff uses its rule for its nodes. */
export function noteGradRegion(g: GraphBuilder, region: GradRegion): void {
  const list = REGIONS.get(g) ?? [];
  list.push(region);
  REGIONS.set(g, list);
}

/** Each node of a region of `g`, with its region. */
export function gradRegionsByNode(g: GraphBuilder): Map<NodeRecord, GradRegion> {
  const byNode = new Map<NodeRecord, GradRegion>();
  for (const region of REGIONS.get(g) ?? []) for (const node of region.nodes) byNode.set(node, region);
  return byNode;
}
