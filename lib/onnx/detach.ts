/**
 * `detach(g, x)`: stop-gradient. The value of `x` (an ONNX Identity), which autodiff treats as a constant:
 * no gradient flows from its uses back into `x` (autodiff.ts skips the node when it finds what depends on
 * the parameters). PyTorch's `x.detach()`, JAX's `lax.stop_gradient`; the losses that need one name it
 * where their gradient stops (lib/losses/).
 *
 * @module
 */

import type { GraphBuilder, Value } from "./builder.ts";

/** `x`, with no gradient flowing back through it. */
export function detach(g: GraphBuilder, x: Value): Value {
  return g.op("Identity", [x], {}, { name: "detach", shape: x.shape, stopsGradient: true });
}
