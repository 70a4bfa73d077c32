/**
 * The fused norms' gradient rule where the provider keeps no statistics (WebGPU: lib/onnx/ops_norm.ts
 * `projectedGrad`), at Qwen3-0.6B's hidden size, against the same gradient in float64 from the same
 * inputs. In float16 the rule runs in float16 (the statistics in float32 inside LayerNormalization), so
 * its sums of `E` products are float16's: this bounds what that costs with gradients as small as a
 * token-mean loss over thousands of tokens gives (1e-4), where the products inside the MatMuls fall to
 * float16's subnormals.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { backward } from "../../lib/onnx/autodiff.ts";
import { GraphBuilder, type Value } from "../../lib/onnx/builder.ts";
import { bindOps } from "../../lib/onnx/ops.ts";
import { createSession } from "../../lib/engine/session.ts";
import { mulberry32 } from "../reference/weights.ts";
import { webgpuTest } from "../helpers/webgpu.ts";

const [N, E, EPS] = [16, 1024, 1e-6];

/** Gaussian-ish values (sum of uniforms) times `scale`, rounded to float16 (the values the graph sees). */
function halfs(n: number, seed: number, scale: number, offset = 0): Float16Array {
  const rand = mulberry32(seed);
  return Float16Array.from({ length: n }, () => offset + scale * (rand() + rand() + rand() - 1.5) * 2);
}

/** dx of `y = x · inv · w` seeded with dy, in float64 from the given values (rows of E). */
function referenceDx(x: Float16Array, w: Float16Array, dy: Float16Array): Float64Array {
  const dx = new Float64Array(x.length);
  for (let r = 0; r < x.length / E; r++) {
    const row = (i: number) => r * E + i;
    let sq = 0;
    for (let i = 0; i < E; i++) sq += x[row(i)] ** 2;
    const inv = 1 / Math.sqrt(sq / E + EPS);
    let m = 0;
    for (let i = 0; i < E; i++) m += dy[row(i)] * w[i] * x[row(i)] * inv;
    m /= E;
    for (let i = 0; i < E; i++) dx[row(i)] = inv * (dy[row(i)] * w[i] - x[row(i)] * inv * m);
  }
  return dx;
}

/** The rule's dx on WebGPU for `norm` (the plain or the skip form, its input the sum x + 0). */
async function webgpuDx(norm: "plain" | "skip", x: Float16Array, w: Float16Array, dy: Float16Array) {
  const g = new GraphBuilder("norm_grad");
  const o = bindOps(g);
  // float32 in and out (exact for float16 values), cast inside: the Node binding takes no float16 here
  const half = (name: string, dims: number[]) => o.Cast(g.input(name, "float32", dims), "float16");
  const [xs, ws, dys] = [half("x", [N, E]), half("w", [E]), half("dy", [N, E])];
  let y: Value;
  if (norm === "plain") y = o.SimplifiedLayerNormalization(xs, ws, EPS);
  else y = o.SkipSimplifiedLayerNormalization(xs, half("zeros", [N, E]), ws, EPS)[0];
  const [dx] = backward(g, [{ value: y, grad: dys }], [xs]);
  g.output(o.Cast(dx!, "float32"), "dx");
  const dir = await Deno.makeTempDir();
  const session = await createSession(g.toModel(), dir, { ep: "webgpu" });
  try {
    const feed = (v: Float16Array, dims: number[]) => new ort.Tensor("float32", Float32Array.from(v), dims);
    const feeds = {
      x: feed(x, [N, E]),
      w: feed(w, [E]),
      dy: feed(dy, [N, E]),
      ...(norm === "skip" ? { zeros: feed(new Float16Array(N * E), [N, E]) } : {}),
    };
    return Float64Array.from((await session.run(feeds)).dx.data as Float32Array);
  } finally {
    await session.release();
    await Deno.remove(dir, { recursive: true });
  }
}

for (const norm of ["plain", "skip"] as const) {
  webgpuTest(
    `float16 ${norm} norm gradient at E = ${E} on WebGPU is within float16's rounding of float64`,
    async () => {
      for (const gradScale of [1, 1e-4]) {
        const x = halfs(N * E, 1, 2);
        const w = halfs(E, 2, 0.3, 1);
        const dy = halfs(N * E, 3, gradScale);
        const want = referenceDx(x, w, dy);
        const got = await webgpuDx(norm, x, w, dy);
        let worst = 0;
        for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
        const rounding = want.reduce((m, v) => Math.max(m, Math.abs(new Float16Array([v])[0] - v)), 0);
        // measured on lavapipe: 1.7 (dy ~1) and 3.5 (dy ~1e-4) times the rounding of the exact dx to float16
        assert.ok(
          worst <= 5 * rounding,
          `dy ~${gradScale}: worst ${worst}, float16's rounding of dx ${rounding}`,
        );
      }
    },
  );
}
