/**
 * The output head pieces in isolation (lib/model/graph/head.ts): the sampler picks exactly the
 * inverse-CDF token for its uniform (with and without vocabulary padding, with top-k / top-p), the same
 * token wherever its row sits in the batch, and the chunked target log-probs equal a plain log-softmax for
 * any row count.
 *
 * The head matrix is the identity, so the "hidden rows" are the logits themselves.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import {
  chunkedTargetLogprobs,
  inverseTemperature,
  logSoftmaxFor,
  sampleNext,
} from "../../lib/model/graph/head.ts";
import { mulberry32 } from "../reference/weights.ts";

function identity(n: number): Float32Array {
  const m = new Float32Array(n * n);
  for (let i = 0; i < n; i++) m[i * n + i] = 1;
  return m;
}

function randomLogits(rows: number, vocab: number, seed: number): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: rows * vocab }, () => (rand() * 2 - 1) * 4);
}

/** softmax(z / T) of one row in float64. */
function probs(z: Float32Array, row: number, vocab: number, temperature: number): number[] {
  const x = Array.from(z.subarray(row * vocab, (row + 1) * vocab), (v) => v / temperature);
  const m = Math.max(...x);
  const e = x.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
}

/** First index whose running sum reaches u · total. */
function inverseCdf(p: number[], u: number): number {
  const total = p.reduce((a, b) => a + b, 0);
  let run = 0;
  for (let i = 0; i < p.length; i++) {
    run += p[i];
    if (run >= u * total) return i;
  }
  return p.length - 1;
}

async function samplerSession(vocab: number) {
  const g = new GraphBuilder("sampler");
  const rows = g.input("rows", "float32", ["B", vocab]);
  const w = g.initializer("w", identity(vocab), [vocab, vocab]);
  const inputs = {
    temperature: g.input("temperature", "float32", []),
    uniforms: g.input("uniforms", "float32", ["B"]),
    filter: g.input("filter", "bool", []),
    topK: g.input("top_k", "int64", [1]),
    topP: g.input("top_p", "float32", []),
  };
  const [tokens, logprobs] = sampleNext(g, rows, w, vocab, inputs);
  g.output(tokens, "tokens");
  g.output(logprobs, "logprobs");
  return await ort.InferenceSession.create(g.toModel());
}

async function sample(
  session: ort.InferenceSession,
  z: Float32Array,
  vocab: number,
  u: number[],
  o: { temperature: number; topK?: number; topP?: number },
) {
  const filter = (o.topK ?? 0) > 0 || (o.topP ?? 1) < 1;
  const out = await session.run({
    rows: new ort.Tensor("float32", z, [u.length, vocab]),
    temperature: new ort.Tensor("float32", Float32Array.from([o.temperature]), []),
    uniforms: new ort.Tensor("float32", Float32Array.from(u), [u.length]),
    filter: new ort.Tensor("bool", Uint8Array.from([filter ? 1 : 0]), []),
    top_k: new ort.Tensor("int64", BigInt64Array.from([BigInt(o.topK || vocab)]), [1]),
    top_p: new ort.Tensor("float32", Float32Array.from([o.topP ?? 1]), []),
  });
  return {
    tokens: Array.from(out.tokens.data as BigInt64Array, Number),
    logprobs: Array.from(out.logprobs.data as Float32Array),
  };
}

for (const vocab of [256, 300]) {
  Deno.test(`the sampler picks the inverse-CDF token of its uniform (vocab ${vocab})`, async () => {
    const session = await samplerSession(vocab);
    const u = [0.001, 0.2, 0.5, 0.77, 0.9999, 0.31, 0.62, 0.05];
    const z = randomLogits(u.length, vocab, vocab);
    for (const temperature of [1, 0.6]) {
      const out = await sample(session, z, vocab, u, { temperature });
      u.forEach((ui, b) => {
        const p = probs(z, b, vocab, temperature);
        const expected = inverseCdf(p, ui);
        // A float32 running sum may land one token off where u sits on a boundary (|Δ| < 1e-6).
        const near = out.tokens[b] === expected ||
          Math.abs(p.slice(0, expected).reduce((a, c) => a + c, 0) - ui) < 1e-5;
        assert.ok(near, `row ${b}: token ${out.tokens[b]}, expected ${expected}`);
        assert.ok(Math.abs(out.logprobs[b] - Math.log(p[out.tokens[b]])) < 1e-5, `row ${b} log-prob`);
      });
    }
    const greedy = await sample(session, z, vocab, u, { temperature: 0 });
    u.forEach((_, b) => {
      const p = probs(z, b, vocab, 1);
      assert.equal(greedy.tokens[b], p.indexOf(Math.max(...p)));
      assert.ok(Math.abs(greedy.logprobs[b] - Math.log(Math.max(...p))) < 1e-5, "greedy log-prob at T = 1");
    });
    await session.release();
  });
}

Deno.test("a row samples the same token wherever it sits in the batch, its uniform on a boundary", async () => {
  // 9 blocks of 128 and top-k 37: rows whose length is not a multiple of 8, where onnxruntime's CPU
  // ReduceSum rounds differently by the row's place (head.ts inverseCdf). Each uniform puts the threshold
  // on a block boundary (or, for top-k, on a kept token's), as float64 puts it, so a total that moved in
  // its last bit picks the neighbour.
  const [vocab, rows] = [9 * 128, 48];
  const session = await samplerSession(vocab);
  const z = randomLogits(rows, vocab, 21);
  const rand = mulberry32(22);
  for (const o of [{ temperature: 1 }, { temperature: 1, topK: 37 }]) {
    const u = Array.from({ length: rows }, (_, b) => {
      const p = probs(z, b, vocab, 1);
      const ranked = o.topK ? [...p].sort((x, y) => y - x).slice(0, o.topK) : blockMasses(p);
      const edge = 1 + Math.floor(rand() * (ranked.length - 1));
      const total = ranked.reduce((a, c) => a + c, 0);
      return ranked.slice(0, edge).reduce((a, c) => a + c, 0) / total;
    });
    const rotated = <T>(xs: T[]) => [xs[rows - 1], ...xs.slice(0, -1)]; // every row one place down
    const zRotated = new Float32Array(rows * vocab);
    zRotated.set(z.subarray((rows - 1) * vocab));
    zRotated.set(z.subarray(0, (rows - 1) * vocab), vocab);
    const inPlace = await sample(session, z, vocab, u, o);
    const moved = await sample(session, zRotated, vocab, rotated(u), o);
    assert.deepEqual(moved.tokens, rotated(inPlace.tokens), `${JSON.stringify(o)}: tokens`);
    assert.deepEqual(moved.logprobs, rotated(inPlace.logprobs), `${JSON.stringify(o)}: log-probs`);
  }
  await session.release();
});

/** The masses of a row's blocks of 128 entries (the two-stage sampler's first stage). */
function blockMasses(p: number[]): number[] {
  return Array.from(
    { length: Math.ceil(p.length / 128) },
    (_, j) => p.slice(j * 128, (j + 1) * 128).reduce((a, c) => a + c, 0),
  );
}

Deno.test("top-k and top-p sample among the kept tokens by inverse CDF, reporting full-softmax log-probs", async () => {
  const vocab = 300;
  const session = await samplerSession(vocab);
  const u = [0.1, 0.5, 0.95, 0.3];
  const z = randomLogits(u.length, vocab, 9);
  for (const o of [{ topK: 5 }, { topP: 0.3 }, { topK: 20, topP: 0.5 }]) {
    const out = await sample(session, z, vocab, u, { temperature: 1, ...o });
    u.forEach((ui, b) => {
      const p = probs(z, b, vocab, 1);
      const order = p.map((_, i) => i).sort((i, j) => p[j] - p[i]).slice(0, o.topK ?? vocab);
      let before = 0;
      const kept = order.filter((i) => {
        const keep = before < (o.topP ?? 1);
        before += p[i];
        return keep;
      });
      const expected = kept[inverseCdf(kept.map((i) => p[i]), ui)];
      assert.equal(out.tokens[b], expected, `${JSON.stringify(o)} row ${b}`);
      assert.ok(Math.abs(out.logprobs[b] - Math.log(p[expected])) < 1e-5);
    });
  }
  await session.release();
});

for (
  const [name, logSoftmax] of [["fused", logSoftmaxFor("cpu")], [
    "composed",
    logSoftmaxFor("webgpu"),
  ]] as const
) {
  Deno.test(`chunked target log-probs equal a plain log-softmax for any row count (${name})`, async () => {
    const vocab = 50;
    const g = new GraphBuilder("chunked");
    const h = g.input("h", "float32", ["N", vocab]);
    const targets = g.input("targets", "int64", ["N"]);
    const temperature = g.input("temperature", "float32", []);
    const w = g.initializer("w", identity(vocab), [vocab, vocab]);
    const lp = chunkedTargetLogprobs(
      g,
      h,
      targets,
      w,
      inverseTemperature(g, temperature),
      16,
      (b, z) => logSoftmax(b, z),
    );
    g.output(lp, "lp");
    const session = await ort.InferenceSession.create(g.toModel());
    for (const n of [1, 16, 17, 50]) {
      const z = randomLogits(n, vocab, n);
      const t = Array.from({ length: n }, (_, i) => (i * 7) % vocab);
      const out = await session.run({
        h: new ort.Tensor("float32", z, [n, vocab]),
        targets: new ort.Tensor("int64", BigInt64Array.from(t, BigInt), [n]),
        temperature: new ort.Tensor("float32", Float32Array.from([0.8]), []),
      });
      const got = out.lp.data as Float32Array;
      assert.equal(got.length, n);
      t.forEach((ti, i) =>
        assert.ok(Math.abs(got[i] - Math.log(probs(z, i, vocab, 0.8)[ti])) < 1e-5, `n ${n} row ${i}`)
      );
    }
    await session.release();
  });
}
