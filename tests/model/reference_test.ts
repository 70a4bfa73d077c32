/**
 * Self-checks of the independent float64 Qwen3 reference (`tests/reference/`), using no other
 * project code: hand-computed values, a second naive implementation, and invariants (causality,
 * RoPE relativity, GQA, LoRA, normalisation, temperature, greedy ties).
 */

import assert from "node:assert/strict";
import { naiveLogits, naiveRope } from "../reference/naive.ts";
import { argmax, rmsNorm, rope } from "../reference/ops.ts";
import { Qwen3Reference } from "../reference/qwen3_f64.ts";
import type { LoraSpec, Qwen3Config, RefTensor } from "../reference/types.ts";
import { linearShape, modulePath, randomLora, randomWeights, tinyConfig } from "../reference/weights.ts";

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what = "") {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i], e = expected[i];
    if (Number.isNaN(e)) assert.ok(Number.isNaN(a), `${what}[${i}]: ${a} should be NaN`);
    else assert.ok(Math.abs(a - e) <= tol * Math.max(1, Math.abs(e)), `${what}[${i}]: ${a} vs ${e}`);
  }
}

const dot = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  Array.from(a).reduce((s, v, i) => s + v * b[i], 0);
const SEQ = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3];
const ALL = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];

/** W + scale · B·A for every LoRA target, written as plain loops over the HF tensors. */
function mergeLora(w: Map<string, RefTensor>, lora: LoraSpec): Map<string, RefTensor> {
  const out = new Map(w);
  for (const [path, { A, B }] of lora.targets) {
    const W = w.get(`${path}.weight`)!;
    const [o, i] = W.shape, r = A.shape[0];
    const data = Float64Array.from(W.data);
    for (let a = 0; a < o; a++) {
      for (let b = 0; b < i; b++) {
        for (let k = 0; k < r; k++) data[a * i + b] += lora.scale * B.data[a * r + k] * A.data[k * i + b];
      }
    }
    out.set(`${path}.weight`, { shape: W.shape, data });
  }
  return out;
}

Deno.test("rmsNorm matches a hand-computed example", () => {
  // x = [1, 2, 3, 4]: mean(x²) = 7.5, 1/sqrt(7.5) = 0.3651483716701107
  const y = rmsNorm(Float64Array.of(1, 2, 3, 4), 1, 4, Float64Array.of(1, 1, 2, 0.5), 0);
  const r = 0.3651483716701107;
  assertClose(y, [r, 2 * r, 6 * r, 2 * r], 1e-15, "rmsNorm");
  const withEps = rmsNorm(Float64Array.of(0, 0), 1, 2, Float64Array.of(1, 1), 1e-6);
  assertClose(withEps, [0, 0], 0, "rmsNorm of zeros");
});

Deno.test("rope rotates each (x[i], x[i + D/2]) pair by pos · theta^(-2i/D)", () => {
  // D = 2: one pair, inverse frequency 1, so position 1 rotates by 1 radian.
  const [c, s] = [Math.cos(1), Math.sin(1)];
  assertClose(rope([2, 3], 1, 10000), [2 * c - 3 * s, 3 * c + 2 * s], 1e-15, "D=2");
  // D = 4, theta = 100: pairs (x0, x2) at angle 3 and (x1, x3) at angle 3 · 100^(-1/2) = 0.3 (pos 3).
  const y = rope([1, 0, 0, 1], 3, 100);
  assertClose(y, [Math.cos(3), -Math.sin(0.3), Math.sin(3), Math.cos(0.3)], 1e-14, "D=4");
  assertClose(rope([1, 2, 3, 4], 0, 10000), [1, 2, 3, 4], 0, "position 0");
  assertClose(
    rope([0.3, -1, 2, 0.5, 1, -2], 7, 1e6),
    naiveRope([0.3, -1, 2, 0.5, 1, -2], 7, 1e6),
    1e-14,
    "naive",
  );
});

Deno.test("rope makes q·k depend only on the position difference", () => {
  const q = [0.3, -1.2, 0.7, 2.0, -0.4, 1.1, 0.9, -0.2];
  const k = [1.5, 0.2, -0.6, 0.8, 1.0, -1.3, 0.4, 0.05];
  for (const delta of [0, 1, 5, 40]) {
    const ref = dot(rope(q, 3 + delta, 10000), rope(k, 3, 10000));
    for (const base of [0, 11, 250]) {
      const d = dot(rope(q, base + delta, 10000), rope(k, base, 10000));
      assert.ok(Math.abs(d - ref) < 1e-12, `delta ${delta} base ${base}: ${d} vs ${ref}`);
    }
  }
  assert.ok(
    Math.abs(dot(rope(q, 4, 10000), rope(k, 3, 10000)) - dot(q, k)) > 1e-3,
    "rotation is not identity",
  );
});

Deno.test("reference equals a naive nested-array Qwen3 (1 layer, vocab 5, hidden 4)", () => {
  const cfg = tinyConfig({ vocab_size: 5, hidden_size: 4, intermediate_size: 6, head_dim: 4 });
  const w = randomWeights(cfg, 7, 1.0);
  const seq = [0, 3, 3, 1, 4, 2, 0];
  const got = new Qwen3Reference(cfg, w).logits(seq);
  naiveLogits(cfg, w, seq).forEach((row, t) => assertClose(got[t], row, 1e-12, `logits[${t}]`));
});

Deno.test("reference equals the naive Qwen3 with 2 layers, 4:2 GQA and an untied head", () => {
  const cfg = tinyConfig({ num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2 });
  const w = randomWeights(cfg, 11, 1.0);
  const untied = { ...cfg, tie_word_embeddings: false, rope_theta: 1e6 };
  const wu = randomWeights(untied, 12, 1.0);
  for (const [c, weights] of [[cfg, w], [untied, wu]] as const) {
    const got = new Qwen3Reference(c, weights).logits(SEQ);
    naiveLogits(c, weights, SEQ).forEach((row, t) => assertClose(got[t], row, 1e-12, `logits[${t}]`));
  }
});

Deno.test("hand-computed model: zero o_proj and down_proj pass the embedding through", () => {
  const cfg = tinyConfig({
    vocab_size: 5,
    hidden_size: 4,
    intermediate_size: 6,
    head_dim: 4,
    rms_norm_eps: 0,
  });
  const w = randomWeights(cfg, 3);
  const E = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 1, 0, 0]];
  w.set("model.embed_tokens.weight", { shape: [5, 4], data: Float64Array.from(E.flat()) });
  w.set("model.norm.weight", { shape: [4], data: Float64Array.of(1, 1, 1, 1) });
  for (const m of ["self_attn.o_proj", "mlp.down_proj"]) {
    const t = w.get(`model.layers.0.${m}.weight`)!;
    w.set(`model.layers.0.${m}.weight`, { shape: t.shape, data: new Float64Array(t.data.length) });
  }
  const ref = new Qwen3Reference(cfg, w);
  // token 0: norm([1,0,0,0]) = [2,0,0,0] → logits [2,0,0,0,2]; token 4: [√2,√2,0,0] → [√2,√2,0,0,2√2]
  const r2 = Math.SQRT2;
  const logits = ref.logits([0, 4]);
  assertClose(logits[0], [2, 0, 0, 0, 2], 1e-15, "token 0");
  assertClose(logits[1], [r2, r2, 0, 0, 2 * r2], 1e-15, "token 4");
  // log p(4 | 0) = 2 - log(2e² + 3); log p(1 | 0, 4) = √2 - log(2e^√2 + 2 + e^(2√2))
  const lp = ref.logprobs([0, 4, 1]);
  const e = Math.exp;
  assertClose(lp, [NaN, 2 - Math.log(2 * e(2) + 3), r2 - Math.log(2 * e(r2) + 2 + e(2 * r2))], 1e-14, "lp");
});

Deno.test("causal: log-probs of a prefix do not change when tokens are appended", () => {
  const cfg = tinyConfig({ num_hidden_layers: 2, vocab_size: 13 });
  const ref = new Qwen3Reference(cfg, randomWeights(cfg, 5));
  const full = ref.logprobs([...SEQ, 12, 0, 7]);
  for (const n of [1, 2, 5, SEQ.length]) {
    assertClose(ref.logprobs(SEQ.slice(0, n)), full.slice(0, n), 1e-13, `prefix ${n}`);
  }
});

Deno.test("shifting all positions by a constant leaves the logits unchanged", () => {
  const cfg = tinyConfig({ num_hidden_layers: 2 });
  const ref = new Qwen3Reference(cfg, randomWeights(cfg, 9));
  const a = ref.logits(SEQ), b = ref.logits(SEQ, SEQ.map((_, t) => t + 37));
  a.forEach((row, t) => assertClose(b[t], row, 1e-11, `logits[${t}]`));
});

Deno.test("GQA with nKV = nH and duplicated k/v rows equals the grouped model", () => {
  const gqa = tinyConfig({ num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2 });
  const mha = { ...gqa, num_key_value_heads: 4 };
  const w = randomWeights(gqa, 21), wm = new Map(w);
  const D = gqa.head_dim, H = gqa.hidden_size;
  for (let l = 0; l < gqa.num_hidden_layers; l++) {
    for (const m of ["k_proj", "v_proj"]) {
      const name = `${modulePath(l, m)}.weight`, src = w.get(name)!.data;
      const data = new Float64Array(4 * D * H);
      for (let h = 0; h < 4; h++) {
        data.set(src.subarray(Math.floor(h / 2) * D * H, (Math.floor(h / 2) + 1) * D * H), h * D * H);
      }
      wm.set(name, { shape: [4 * D, H], data });
    }
  }
  const a = new Qwen3Reference(gqa, w).logprobs(SEQ), b = new Qwen3Reference(mha, wm).logprobs(SEQ);
  assertClose(b, a, 1e-13, "logprobs");
});

Deno.test("LoRA with B = 0 equals no LoRA", () => {
  const cfg = tinyConfig({ num_hidden_layers: 2 });
  const w = randomWeights(cfg, 4);
  const lora = randomLora(cfg, ALL, { rank: 2, scale: 2, seed: 8 });
  for (const pair of lora.targets.values()) {
    pair.B = { shape: pair.B.shape, data: new Float32Array(pair.B.data.length) };
  }
  assertClose(
    new Qwen3Reference(cfg, w, lora).logprobs(SEQ),
    new Qwen3Reference(cfg, w).logprobs(SEQ),
    0,
    "lp",
  );
});

Deno.test("LoRA equals the reference on merged weights W + scale·B·A (rank 1 and rank 3)", () => {
  const cfg = tinyConfig({ num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2 });
  const w = randomWeights(cfg, 4);
  const plain = new Qwen3Reference(cfg, w).logprobs(SEQ);
  for (const [rank, modules] of [[1, ALL], [3, ["q_proj", "v_proj", "down_proj"]]] as const) {
    const lora = randomLora(cfg, [...modules], { rank, scale: 16 / rank, seed: 30 + rank });
    const got = new Qwen3Reference(cfg, w, lora).logprobs(SEQ);
    assertClose(got, new Qwen3Reference(cfg, mergeLora(w, lora)).logprobs(SEQ), 1e-12, `rank ${rank}`);
    assert.ok(Math.abs(got[5] - plain[5]) > 1e-4, "the adapter changes the output");
  }
});

Deno.test("next-token log-probs exponentiate to 1 over the vocab and agree with logprobs()", () => {
  const cfg = tinyConfig({ vocab_size: 17 });
  const ref = new Qwen3Reference(cfg, randomWeights(cfg, 2));
  const lp = ref.logprobs(SEQ);
  assert.ok(Number.isNaN(lp[0]));
  for (const t of [1, 4, SEQ.length - 1]) {
    const all = ref.nextLogprobsAll(SEQ.slice(0, t));
    assert.ok(Math.abs(all.reduce((s, v) => s + Math.exp(v), 0) - 1) < 1e-13, `sum at ${t}`);
    assert.ok(Math.abs(all[SEQ[t]] - lp[t]) < 1e-13, `entry ${t}`);
  }
});

Deno.test("temperature divides the logits before the log-softmax", () => {
  const cfg = tinyConfig({ vocab_size: 17, num_hidden_layers: 2 });
  const ref = new Qwen3Reference(cfg, randomWeights(cfg, 6, 2.0));
  const logits = ref.logits(SEQ);
  for (const temp of [0.3, 0.7, 1, 2.5]) {
    const expected = SEQ.map((tok, t) => {
      if (t === 0) return NaN;
      const z = Array.from(logits[t - 1], (v) => v / temp);
      return z[tok] - Math.log(z.reduce((s, v) => s + Math.exp(v), 0));
    });
    assertClose(ref.logprobs(SEQ, temp), expected, 1e-12, `T=${temp}`);
    const all = ref.nextLogprobsAll(SEQ, temp), last = Array.from(logits[SEQ.length - 1], (v) => v / temp);
    const lse = Math.log(last.reduce((s, v) => s + Math.exp(v), 0));
    assertClose(all, last.map((v) => v - lse), 1e-12, `all T=${temp}`);
  }
  const cold = ref.nextLogprobsAll(SEQ, 1e-4); // logits / T reach ~1e4: exp must not overflow
  assert.ok(Math.abs(cold.reduce((s, v) => s + Math.exp(v), 0) - 1) < 1e-12, "cold sum");
  assert.ok(ref.logprobs(SEQ, 1e-4).slice(1).every((v) => v <= 0 && !Number.isNaN(v)), "cold lp");
  assert.throws(() => ref.logprobs(SEQ, 0), /temperature 0/);
});

Deno.test("greedy picks the argmax step by step, ties to the lowest id", () => {
  const cfg = tinyConfig({ num_hidden_layers: 2, tie_word_embeddings: false });
  const w = randomWeights(cfg, 13, 2.0);
  const ref = new Qwen3Reference(cfg, w);
  const out = ref.greedy([1, 2, 3], 6);
  const seq = [1, 2, 3];
  for (const tok of out) {
    const logits = ref.logits(seq);
    assert.equal(tok, argmax(logits[seq.length - 1]));
    seq.push(tok);
  }
  w.set("lm_head.weight", { shape: [11, 8], data: new Float64Array(88) });
  assert.deepEqual(new Qwen3Reference(cfg, w).greedy([5], 3), [0, 0, 0]);
});

Deno.test("bad inputs fail with a message naming the value", () => {
  const cfg = tinyConfig();
  const w = randomWeights(cfg, 1);
  assert.throws(
    () => new Qwen3Reference({ ...cfg, tie_word_embeddings: false }, w),
    /"lm_head.weight" is missing/,
  );
  const bad = new Map(w).set("model.norm.weight", { shape: [7], data: new Float32Array(7) });
  assert.throws(() => new Qwen3Reference(cfg, bad), /"model.norm.weight" has shape \[7\]/);
  const lora = randomLora(cfg, ["q_proj"], { rank: 1, scale: 1, seed: 1 });
  lora.targets.set("model.layers.5.self_attn.q_proj", lora.targets.get(modulePath(0, "q_proj"))!);
  assert.throws(
    () => new Qwen3Reference(cfg, w, lora),
    /"model.layers.5.self_attn.q_proj" matches no Linear/,
  );
  assert.throws(() => new Qwen3Reference(cfg, w).logprobs([1, 11]), /Token 11 at position 1/);
  assert.deepEqual(linearShape(cfg, "o_proj"), [8, 8]);
});

Deno.test("a vocab-151936 tiny model (2 layers, hidden 64) scores 64 tokens in seconds", () => {
  const cfg: Qwen3Config = tinyConfig({
    vocab_size: 151936,
    hidden_size: 64,
    intermediate_size: 128,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 16,
    rope_theta: 1e6,
  });
  const ref = new Qwen3Reference(cfg, randomWeights(cfg, 99));
  const seq = Array.from({ length: 64 }, (_, t) => (t * 7919 + 13) % 151936);
  const t0 = performance.now();
  const lp = ref.logprobs(seq);
  const ms = performance.now() - t0;
  assert.equal(lp.length, 64);
  assert.ok(lp.slice(1).every((v) => Number.isFinite(v) && v < 0));
  assert.ok(ms < 10000, `logprobs took ${ms.toFixed(0)} ms`);
  console.log(`logprobs of 64 tokens, vocab 151936: ${ms.toFixed(0)} ms`);
  const t1 = performance.now();
  assert.equal(ref.greedy(seq.slice(0, 32), 8).length, 8);
  console.log(`greedy 8 tokens after 32: ${(performance.now() - t1).toFixed(0)} ms`);
});
