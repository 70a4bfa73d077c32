/**
 * The fused RMSNorm ops (lib/onnx/ops_norm.ts): values equal to the composed rmsNorm (compose.ts), their
 * gradient rules against central finite differences (float64 where onnxruntime's CPU provider has a
 * double kernel, float32 for the skip form, which has none), statistics in float32 for float16 inputs
 * whose squares overflow float16, and the checks on dtypes.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import { rmsNorm } from "../../lib/onnx/compose.ts";
import { bindOps } from "../../lib/onnx/ops.ts";
import { checkGrad, rand, runModel } from "../helpers/grad_check.ts";

const EPS = 1e-6;

Deno.test("SimplifiedLayerNormalization equals the composed rmsNorm, and its skip form adds first", async () => {
  const g = new GraphBuilder("norm");
  const o = bindOps(g);
  const x = g.input("x", "float32", [2, 3, 8]);
  const s = g.input("s", "float32", [2, 3, 8]);
  const w = g.input("w", "float32", [8]);
  g.output(o.SimplifiedLayerNormalization(x, w, EPS), "fused");
  g.output(rmsNorm(g, x, w, EPS), "composed");
  const [skipped, sum] = o.SkipSimplifiedLayerNormalization(x, s, w, EPS);
  g.output(skipped, "skipped");
  g.output(sum, "sum");
  g.output(rmsNorm(g, o.Add(x, s), w, EPS), "composedSkip");
  const feed = (dims: number[], seed: number) =>
    new ort.Tensor("float32", Float32Array.from(rand(dims, seed, 3).data), dims);
  const out = await runModel(g, { x: feed([2, 3, 8], 1), s: feed([2, 3, 8], 2), w: feed([8], 3) });
  const close = (a: string, b: string) => {
    const [p, q] = [out[a].data as Float32Array, out[b].data as Float32Array];
    p.forEach((v, i) => assert.ok(Math.abs(v - q[i]) < 1e-5, `${a}[${i}] = ${v}, ${b} ${q[i]}`));
  };
  close("fused", "composed");
  close("skipped", "composedSkip");
  const [x0, s0, sum0] = [out.fused, feed([2, 3, 8], 2), out.sum].map((t) => t.data as Float32Array);
  assert.equal(x0.length, sum0.length);
  const xs = feed([2, 3, 8], 1).data as Float32Array;
  sum0.forEach((v, i) => assert.ok(Math.abs(v - (xs[i] + s0[i])) < 1e-6, "the sum output is input + skip"));
});

Deno.test("SimplifiedLayerNormalization's rule matches finite differences (x and weight, float64)", async () => {
  await checkGrad(
    { x: rand([2, 3, 8], 4, 2), w: rand([8], 5) },
    (g, v) => bindOps(g).SimplifiedLayerNormalization(v.x, v.w, EPS),
  );
  await checkGrad({ x: rand([5, 4], 6), w: rand([4], 7) }, (g, v) => {
    const o = bindOps(g);
    return o.Mul(o.SimplifiedLayerNormalization(v.x, v.w, EPS), v.x); // x also reaches y another way
  });
});

Deno.test("SkipSimplifiedLayerNormalization's rule matches finite differences through y and the sum", async () => {
  await checkGrad(
    { a: rand([2, 3, 8], 8, 2), b: rand([2, 3, 8], 9), w: rand([8], 10) },
    (g, v) => {
      const o = bindOps(g);
      const [y, sum] = o.SkipSimplifiedLayerNormalization(v.a, v.b, v.w, EPS);
      return o.Add(y, o.Mul(sum, 0.5)); // [2, 3, 8]: both outputs reach the loss
    },
    { dtype: "float32" },
  );
  await checkGrad(
    { a: rand([4, 8], 11), b: rand([4, 8], 12), w: { ...rand([8], 13), frozen: true } },
    (g, v) => bindOps(g).SkipSimplifiedLayerNormalization(v.a, v.b, v.w, EPS)[0], // y alone
    { dtype: "float32" },
  );
});

Deno.test("with the statistics read from the forward (the CPU provider's inv_std_var), both rules match finite differences", async () => {
  const walk = { dtype: "float32" as const, backward: { readsNormStats: true } };
  await checkGrad({ x: rand([5, 4], 14, 2), w: { ...rand([4], 15), frozen: true } }, (g, v) => {
    const o = bindOps(g);
    return o.Mul(o.SimplifiedLayerNormalization(v.x, v.w, EPS, true), v.x); // x also reaches y another way
  }, walk);
  await checkGrad(
    { a: rand([2, 3, 8], 16, 2), b: rand([2, 3, 8], 17), w: { ...rand([8], 18), frozen: true } },
    (g, v) => {
      const o = bindOps(g);
      const [y, sum] = o.SkipSimplifiedLayerNormalization(v.a, v.b, v.w, EPS);
      return o.Add(y, o.Mul(sum, 0.5)); // [2, 3, 8]: both outputs reach the loss
    },
    walk,
  );
});

Deno.test("float16 inputs whose squares overflow float16 are normalized with float32 statistics", async () => {
  const g = new GraphBuilder("wide");
  const o = bindOps(g);
  const x = g.input("x", "float32", [2, 64]);
  const w = g.input("w", "float32", [64]);
  const y = o.SimplifiedLayerNormalization(o.Cast(x, "float16"), o.Cast(w, "float16"), EPS);
  g.output(o.Cast(y, "float32"), "y");
  g.output(rmsNorm(g, x, w, EPS), "reference");
  const data = Float32Array.from(rand([2, 64], 14).data, (v) => 400 * v); // x² up to 1.6e5 > 65504
  const out = await runModel(g, {
    x: new ort.Tensor("float32", data, [2, 64]),
    w: new ort.Tensor("float32", Float32Array.from(rand([64], 15).data), [64]),
  });
  const [got, want] = [out.y.data as Float32Array, out.reference.data as Float32Array];
  got.forEach((v, i) => assert.ok(Math.abs(v - want[i]) < 4e-3, `y[${i}] = ${v}, float32 ${want[i]}`));
});

Deno.test("the fused norms refuse mixed dtypes, and the skip form a dtype onnxruntime has no kernel for", () => {
  const g = new GraphBuilder("checks");
  const o = bindOps(g);
  const x = g.input("x", "float16", [2, 8]);
  const w = g.input("w", "float32", [8]);
  assert.throws(() => o.SimplifiedLayerNormalization(x, w, EPS), /SimplifiedLayerNormalization: .*dtype/);
  const d = g.input("d", "float64", [2, 8]);
  const dw = g.input("dw", "float64", [8]);
  assert.throws(() => o.SkipSimplifiedLayerNormalization(d, d, dw, EPS), /float32 and float16/);
});
