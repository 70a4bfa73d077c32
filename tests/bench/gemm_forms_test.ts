/**
 * bench/gemm_forms.ts: every form of a product computes the same `x · Wᵀ` from the checkpoint's `[out, in]`
 * W (the forms differ only in how W is stored), and the product list covers what the graphs multiply.
 */

import assert from "node:assert/strict";
import { formGraph, type GemmForm, products, SHAPES, shapesOf } from "../../bench/gemm_forms.ts";
import { openEngineSession } from "../../lib/engine/session.ts";
import { UserError } from "../../lib/errors.ts";

/** `x [m, k] · w` with w `[n, k]` (the checkpoint's layout), in float64. */
function reference(x: Float32Array, w: Float32Array, m: number, k: number, n: number): Float64Array {
  const y = new Float64Array(m * n);
  for (let i = 0; i < m; i++) {
    for (let j = 0; j < n; j++) {
      for (let t = 0; t < k; t++) y[i * n + j] += x[i * k + t] * w[j * k + t];
    }
  }
  return y;
}

Deno.test("each GEMM form of a product computes x · Wᵀ from the weight stored as that form needs it", async () => {
  const [m, k, n] = [3, 5, 4];
  const x = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i + 1));
  const w = Float32Array.from({ length: n * k }, (_, i) => Math.cos(2 * i + 1)); // [n, k]
  const wT = Float32Array.from({ length: k * n }, (_, i) => w[(i % n) * k + Math.floor(i / n)]); // [k, n]
  const want = reference(x, w, m, k, n);
  const forms: GemmForm[] = ["gemm_transB", "matmul", "gemm"];
  for (const form of forms) {
    const session = await openEngineSession(formGraph({ name: "t", m, k, n, forms }, form, "float32"), ".");
    try {
      const y = new Float32Array(m * n);
      const stored = form === "gemm_transB" ? { data: w, dims: [n, k] } : { data: wT, dims: [k, n] };
      await session.run(
        { x: { type: "float32", data: x, dims: [m, k] }, w: { type: "float32", ...stored } },
        { y: { type: "float32", data: y, dims: [m, n] } },
      );
      y.forEach((v, i) => assert.ok(Math.abs(v - want[i]) < 1e-5, `${form}[${i}]: ${v} vs ${want[i]}`));
    } finally {
      await session.close();
    }
  }
});

Deno.test("the products are the graphs' Linear groups, forward and input gradient, the head and LoRA's factors", async () => {
  const s = SHAPES["qwen3-0.6b"];
  const list = products(s, 32, 16);
  const byName = Object.fromEntries(list.map((p) => [p.name, [p.m, p.k, p.n]]));
  assert.deepEqual(byName["qkv forward"], [32, 1024, 2048 + 2 * 1024]);
  assert.deepEqual(byName["o dX"], [32, 1024, 2048]);
  assert.deepEqual(byName["gate_up forward"], [32, 1024, 2 * 3072]);
  assert.deepEqual(byName["down forward"], [32, 3072, 1024]);
  assert.deepEqual(byName["head forward"], [32, 1024, 151936]);
  assert.deepEqual(byName["lora A (q/k/v)"], [32, 1024, 48]);
  assert.deepEqual(byName["lora B (q/k/v)"], [32, 48, 4096]);
  assert.equal(list.length, 12);
  assert.deepEqual(products(s, 1, 16, ["head"]).map((p) => p.name), ["head forward", "head dX"]);
  await assert.rejects(() => shapesOf("/no/such/model"), UserError);
});
