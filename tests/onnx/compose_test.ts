/**
 * Composites (RMSNorm, SwiGLU, log-softmax, RoPE, attention, unbroadcast) and the com.microsoft
 * GroupQueryAttention / RotaryEmbedding ops, compared with plain TypeScript.
 *
 * Dimension legend: B batch, T tokens, H query heads, Hkv key/value heads, D head dim.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import {
  attention,
  logSoftmax,
  repeatKv,
  rmsNorm,
  rope,
  swiglu,
  unbroadcast,
} from "../../lib/onnx/compose.ts";
import { bindOps } from "../../lib/onnx/ops.ts";

async function run(g: GraphBuilder, feeds: Record<string, ort.Tensor>): Promise<Record<string, ort.Tensor>> {
  const session = await ort.InferenceSession.create(g.toModel());
  try {
    return await session.run(feeds);
  } finally {
    await session.release();
  }
}

function f32(data: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor("float32", new Float32Array(data), dims);
}

function nums(t: ort.Tensor): number[] {
  return Array.from(t.data as ArrayLike<number>, Number);
}

function close(actual: number[], expected: number[], tol = 1e-5): void {
  assert.equal(actual.length, expected.length);
  actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]) <= tol, `at ${i}: ${a} vs ${expected[i]}`));
}

/** Deterministic pseudo-random values in [-1, 1). */
function noise(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => Math.sin(seed * 12.9898 + i * 78.233) % 1);
}

Deno.test("rmsNorm, swiglu and logSoftmax match their definitions", async () => {
  const g = new GraphBuilder("compose");
  const x = g.input("x", "float32", ["B", 4]);
  const w = g.initializer("w", new Float32Array([1, 0.5, 2, -1]), [4]);
  g.output(rmsNorm(g, x, w, 1e-6), "norm");
  g.output(swiglu(g, x, bindOps(g).Neg(x)), "swiglu");
  g.output(logSoftmax(g, x), "logsm");
  const xs = noise(8, 1).map((v) => v * 3);
  const out = await run(g, { x: f32(xs, [2, 4]) });
  const rows = [xs.slice(0, 4), xs.slice(4)];
  const norm = rows.flatMap((r) => {
    const inv = 1 / Math.sqrt(r.reduce((s, v) => s + v * v, 0) / 4 + 1e-6);
    return r.map((v, i) => v * inv * [1, 0.5, 2, -1][i]);
  });
  close(nums(out.norm), norm);
  close(nums(out.swiglu), xs.map((v) => (v / (1 + Math.exp(-v))) * -v));
  const lse = rows.map((r) => Math.log(r.reduce((s, v) => s + Math.exp(v), 0)));
  close(nums(out.logsm), rows.flatMap((r, i) => r.map((v) => v - lse[i])));
});

/** Half-split RoPE of one head vector at position p (Qwen3 / HF `rotate_half` convention). */
function ropeRef(v: number[], p: number, theta: number): number[] {
  const d = v.length;
  const out = new Array<number>(d);
  for (let i = 0; i < d / 2; i++) {
    const angle = p * theta ** (-(2 * i) / d);
    const [c, s] = [Math.cos(angle), Math.sin(angle)];
    out[i] = v[i] * c - v[i + d / 2] * s;
    out[i + d / 2] = v[i + d / 2] * c + v[i] * s;
  }
  return out;
}

/** cos/sin tables `[maxLen, D/2]`. */
function ropeTables(maxLen: number, d: number, theta: number): { cos: number[]; sin: number[] } {
  const cos: number[] = [];
  const sin: number[] = [];
  for (let p = 0; p < maxLen; p++) {
    for (let i = 0; i < d / 2; i++) {
      const angle = p * theta ** (-(2 * i) / d);
      cos.push(Math.cos(angle));
      sin.push(Math.sin(angle));
    }
  }
  return { cos, sin };
}

Deno.test("rope composite and com.microsoft RotaryEmbedding both match half-split RoPE", async () => {
  const [T, H, D, theta] = [3, 2, 4, 10000];
  const { cos, sin } = ropeTables(8, D, theta);
  const full = (t: number[]) =>
    Array.from({ length: T }, (_, p) => t.slice(p * 2, p * 2 + 2)).flatMap((h) => [...h, ...h]);
  const g = new GraphBuilder("rope");
  const o = bindOps(g);
  const x = g.input("x", "float32", [1, T, H * D]); // [B, T, H*D]
  const xh = o.Transpose(o.Reshape(x, [1, T, H, D]), [0, 2, 1, 3]); // [B, H, T, D]
  const cosFull = g.constant(new Float32Array(full(cos)), [1, 1, T, D]);
  const sinFull = g.constant(new Float32Array(full(sin)), [1, 1, T, D]);
  g.output(rope(g, xh, cosFull, sinFull, D), "composite"); // [B, H, T, D]
  const pos = g.constant(BigInt64Array.from([0n, 1n, 2n]), [1, T]);
  const cosCache = g.constant(new Float32Array(cos), [8, D / 2]);
  const sinCache = g.constant(new Float32Array(sin), [8, D / 2]);
  g.output(o.RotaryEmbedding(x, pos, cosCache, sinCache, { numHeads: H }), "contrib"); // [B, T, H*D]
  const xs = noise(T * H * D, 2);
  const out = await run(g, { x: f32(xs, [1, T, H * D]) });
  const head = (t: number, h: number) => xs.slice(t * H * D + h * D, t * H * D + (h + 1) * D);
  const bhtd = [0, 1].flatMap((h) => [0, 1, 2].flatMap((t) => ropeRef(head(t, h), t, theta)));
  const bthd = [0, 1, 2].flatMap((t) => [0, 1].flatMap((h) => ropeRef(head(t, h), t, theta)));
  close(nums(out.composite), bhtd);
  close(nums(out.contrib), bthd);
});

/**
 * Causal GQA reference: q [T, H*D], k and v [S, Hkv*D] for one sequence whose first query token sits
 * at position S - T. Returns [T, H*D].
 */
function gqaRef(
  q: number[],
  k: number[],
  v: number[],
  T: number,
  S: number,
  H: number,
  Hkv: number,
  D: number,
) {
  const out: number[] = [];
  for (let t = 0; t < T; t++) {
    for (let h = 0; h < H; h++) {
      const kvh = Math.floor(h / (H / Hkv));
      const visible = S - T + t + 1;
      const scores = Array.from({ length: visible }, (_, s) => {
        let dot = 0;
        for (let d = 0; d < D; d++) dot += q[t * H * D + h * D + d] * k[s * Hkv * D + kvh * D + d];
        return dot / Math.sqrt(D);
      });
      const m = Math.max(...scores);
      const e = scores.map((x) => Math.exp(x - m));
      const z = e.reduce((a, b) => a + b, 0);
      for (let d = 0; d < D; d++) {
        out.push(e.reduce((acc, p, s) => acc + (p / z) * v[s * Hkv * D + kvh * D + d], 0));
      }
    }
  }
  return out;
}

Deno.test("GroupQueryAttention prefill matches plain causal attention and the composite", async () => {
  const [T, H, Hkv, D] = [3, 4, 2, 8]; // onnxruntime's CPU GQA needs D % 8 == 0
  const g = new GraphBuilder("gqa");
  const o = bindOps(g);
  const q = g.input("q", "float32", [1, T, H * D]);
  const k = g.input("k", "float32", [1, T, Hkv * D]);
  const v = g.input("v", "float32", [1, T, Hkv * D]);
  const seqlensK = g.constant(new Int32Array([T - 1]), [1]);
  const total = g.constant(new Int32Array([T]), []);
  const [y, presentK] = o.GroupQueryAttention(
    { query: q, key: k, value: v, seqlensK, totalSequenceLength: total },
    { numHeads: H, kvNumHeads: Hkv },
  );
  g.output(y, "gqa");
  g.output(presentK, "present_k");
  // The same attention from primitive ops: heads split, KV heads repeated, causal additive mask.
  const heads = (x: typeof q, n: number) => o.Transpose(o.Reshape(x, [1, T, n, D]), [0, 2, 1, 3]); // [B, n, T, D]
  const mask = Array.from({ length: T * T }, (_, i) => (i % T > Math.floor(i / T) ? -1e9 : 0));
  const bias = g.constant(new Float32Array(mask), [1, 1, T, T]);
  const kr = repeatKv(g, heads(k, Hkv), H / Hkv, D); // [B, H, T, D]
  const vr = repeatKv(g, heads(v, Hkv), H / Hkv, D); // [B, H, T, D]
  const att = attention(g, heads(q, H), kr, vr, D, { bias }); // [B, H, T, D]
  g.output(o.Reshape(o.Transpose(att, [0, 2, 1, 3]), [1, T, H * D]), "composite");
  const [qs, ks, vs] = [noise(T * H * D, 3), noise(T * Hkv * D, 4), noise(T * Hkv * D, 5)];
  const out = await run(g, {
    q: f32(qs, [1, T, H * D]),
    k: f32(ks, [1, T, Hkv * D]),
    v: f32(vs, [1, T, Hkv * D]),
  });
  const ref = gqaRef(qs, ks, vs, T, T, H, Hkv, D);
  close(nums(out.gqa), ref);
  close(nums(out.composite), ref);
  assert.deepEqual(out.present_k.dims, [1, Hkv, T, D]);
});

Deno.test("GroupQueryAttention decodes one token against a pre-allocated past buffer", async () => {
  const [P, MAX, H, Hkv, D] = [3, 6, 2, 1, 8];
  const g = new GraphBuilder("gqa_decode");
  const o = bindOps(g);
  const q = g.input("q", "float32", [1, 1, H * D]);
  const k = g.input("k", "float32", [1, 1, Hkv * D]);
  const v = g.input("v", "float32", [1, 1, Hkv * D]);
  const pastK = g.input("past_k", "float32", [1, Hkv, MAX, D]);
  const pastV = g.input("past_v", "float32", [1, Hkv, MAX, D]);
  const seqlensK = g.constant(new Int32Array([P]), [1]);
  const total = g.constant(new Int32Array([P + 1]), []);
  const [y, presentK] = o.GroupQueryAttention(
    { query: q, key: k, value: v, pastKey: pastK, pastValue: pastV, seqlensK, totalSequenceLength: total },
    { numHeads: H, kvNumHeads: Hkv },
  );
  g.output(y, "y");
  g.output(presentK, "present_k");
  const [ks, vs] = [noise((P + 1) * D, 6), noise((P + 1) * D, 7)];
  const padded = (xs: number[]) => [...xs.slice(0, P * D), ...new Array((MAX - P) * D).fill(0)];
  const qs = noise(H * D, 8);
  const out = await run(g, {
    q: f32(qs, [1, 1, H * D]),
    k: f32(ks.slice(P * D), [1, 1, D]),
    v: f32(vs.slice(P * D), [1, 1, D]),
    past_k: f32(padded(ks), [1, Hkv, MAX, D]),
    past_v: f32(padded(vs), [1, Hkv, MAX, D]),
  });
  close(nums(out.y), gqaRef(qs, ks, vs, 1, P + 1, H, Hkv, D));
  assert.deepEqual(out.present_k.dims, [1, Hkv, MAX, D]);
  close(nums(out.present_k).slice(0, (P + 1) * D), ks);
});

Deno.test("unbroadcast sums a gradient back to a broadcast operand's shape", async () => {
  const g = new GraphBuilder("unb");
  const grad = g.input("grad", "float32", ["B", 2, 3]);
  const bias = g.input("bias", "float32", [1, 3]);
  const r = unbroadcast(g, grad, bias);
  assert.deepEqual(r.shape, [1, 3]);
  g.output(r, "r");
  const data = noise(12, 9);
  const out = await run(g, { grad: f32(data, [2, 2, 3]), bias: f32([0, 0, 0], [1, 3]) });
  const col = (j: number) => [0, 1, 2, 3].reduce((s, row) => s + data[row * 3 + j], 0);
  close(nums(out.r), [col(0), col(1), col(2)]);
});
