/**
 * The op table's emitters, run through onnxruntime (CPU) and compared with plain TypeScript.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { GraphBuilder, type Value } from "../../lib/onnx/builder.ts";
import { bindOps, opDefOf, OPS } from "../../lib/onnx/ops.ts";

type Feeds = Record<string, ort.Tensor>;

/** Builds the model, runs it once on CPU and returns every output. */
async function run(g: GraphBuilder, feeds: Feeds): Promise<Record<string, ort.Tensor>> {
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

function i64(data: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor("int64", BigInt64Array.from(data, BigInt), dims);
}

function nums(t: ort.Tensor): number[] {
  return Array.from(t.data as ArrayLike<number | bigint>, Number);
}

function close(actual: number[], expected: number[], tol = 1e-5): void {
  assert.equal(actual.length, expected.length, `length ${actual.length} vs ${expected.length}`);
  actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]) <= tol, `at ${i}: ${a} vs ${expected[i]}`));
}

const X = [0.5, -1.25, 2, 0.75, 1.5, -0.25]; // [2, 3]
const Y = [1.5, 0.25, -2]; // [3]

Deno.test("elementwise ops broadcast and take plain numbers as scalars", async () => {
  const g = new GraphBuilder("eltwise");
  const o = bindOps(g);
  const x = g.input("x", "float32", [2, 3]);
  const y = g.input("y", "float32", [3]);
  const sum = o.Add(x, y);
  assert.deepEqual(sum.shape, [2, 3]);
  g.output(sum, "add");
  g.output(o.Sub(x, 1), "sub");
  g.output(o.Div(o.Mul(x, y), 2), "muldiv");
  g.output(o.Pow(o.Abs(x), 1.5), "pow");
  g.output(o.Sqrt(o.Reciprocal(o.Exp(o.Neg(x)))), "chain");
  g.output(o.Log(o.Add(o.Sigmoid(x), o.Tanh(o.Abs(x)))), "logmix");
  g.output(o.Max(x, y, 0), "max");
  g.output(o.Min(x, y), "min");
  g.output(o.Clip(x, -1, 1), "clip");
  g.output(o.Clip(x, null, 0.6), "cliphi");
  const out = await run(g, { x: f32(X, [2, 3]), y: f32(Y, [3]) });
  const yb = (i: number) => Y[i % 3];
  close(nums(out.add), X.map((v, i) => v + yb(i)));
  close(nums(out.sub), X.map((v) => v - 1));
  close(nums(out.muldiv), X.map((v, i) => (v * yb(i)) / 2));
  close(nums(out.pow), X.map((v) => Math.abs(v) ** 1.5));
  close(nums(out.chain), X.map((v) => Math.sqrt(1 / Math.exp(-v))));
  close(nums(out.logmix), X.map((v) => Math.log(1 / (1 + Math.exp(-v)) + Math.tanh(Math.abs(v)))));
  close(nums(out.max), X.map((v, i) => Math.max(v, yb(i), 0)));
  close(nums(out.min), X.map((v, i) => Math.min(v, yb(i))));
  close(nums(out.clip), X.map((v) => Math.min(1, Math.max(-1, v))));
  close(nums(out.cliphi), X.map((v) => Math.min(0.6, v)));
});

Deno.test("comparisons, logic, Where and Cast", async () => {
  const g = new GraphBuilder("logic");
  const o = bindOps(g);
  const x = g.input("x", "float32", [2, 3]);
  const y = g.input("y", "float32", [3]);
  const both = o.And(o.Greater(x, 0), o.Not(o.Less(x, y)));
  assert.equal(both.dtype, "bool");
  g.output(o.Where(both, x, -9), "where");
  g.output(o.Cast(o.Equal(o.Floor(x), 0), "float32"), "eq");
  g.output(o.Cast(x, "int64"), "toint");
  const out = await run(g, { x: f32(X, [2, 3]), y: f32(Y, [3]) });
  close(nums(out.where), X.map((v, i) => (v > 0 && !(v < Y[i % 3]) ? v : -9)));
  close(nums(out.eq), X.map((v) => (Math.floor(v) === 0 ? 1 : 0)));
  assert.deepEqual(nums(out.toint), X.map((v) => Math.trunc(v) || 0));
});

/** Plain row-major batched matmul: a [n, m, k] · b [k, p]. */
function matmul(a: number[], b: number[], n: number, m: number, k: number, p: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < n * m; i++) {
    for (let j = 0; j < p; j++) {
      let s = 0;
      for (let t = 0; t < k; t++) s += a[i * k + t] * b[t * p + j];
      out.push(s);
    }
  }
  return out;
}

Deno.test("MatMul with symbolic batch and sequence dims, and Gemm", async () => {
  const g = new GraphBuilder("mm");
  const o = bindOps(g);
  const x = g.input("x", "float32", ["B", "T", 4]);
  const wData = Array.from({ length: 12 }, (_, i) => (i - 6) / 4);
  const w = g.initializer("w", new Float32Array(wData), [4, 3]);
  const y = o.MatMul(x, w);
  assert.deepEqual(y.shape, ["B", "T", 3]);
  g.output(y, "y");
  const a = g.input("a", "float32", [2, 4]);
  g.output(o.Gemm(a, w, g.vector([1, 2, 3]), { alpha: 2 }), "gemm");
  const xData = Array.from({ length: 2 * 3 * 4 }, (_, i) => Math.sin(i));
  const out = await run(g, { x: f32(xData, [2, 3, 4]), a: f32(xData.slice(0, 8), [2, 4]) });
  assert.deepEqual(out.y.dims, [2, 3, 3]);
  close(nums(out.y), matmul(xData, wData, 2, 3, 4, 3));
  const ab = matmul(xData.slice(0, 8), wData, 1, 2, 4, 3);
  close(nums(out.gemm), ab.map((v, i) => 2 * v + [1, 2, 3][i % 3]));
});

Deno.test("Softmax and reductions with axes given as a graph input", async () => {
  const g = new GraphBuilder("reduce");
  const o = bindOps(g);
  const x = g.input("x", "float32", [2, 3]);
  const axes = g.input("axes", "int64", [1]);
  g.output(o.Softmax(x), "softmax");
  g.output(o.ReduceSum(x, axes, { keepdims: false }), "sum");
  g.output(o.ReduceMean(x, axes), "mean");
  g.output(o.ReduceMax(x, [0], { keepdims: false }), "max0");
  g.output(o.ReduceLogSumExp(x, axes, { keepdims: false }), "lse");
  g.output(o.ReduceSum(x), "all");
  const out = await run(g, { x: f32(X, [2, 3]), axes: i64([1], [1]) });
  const rows = [X.slice(0, 3), X.slice(3)];
  const lse = rows.map((r) => Math.log(r.reduce((s, v) => s + Math.exp(v), 0)));
  close(nums(out.softmax), rows.flatMap((r, i) => r.map((v) => Math.exp(v - lse[i]))));
  close(nums(out.sum), rows.map((r) => r[0] + r[1] + r[2]));
  assert.deepEqual(out.mean.dims, [2, 1]);
  close(nums(out.mean), rows.map((r) => (r[0] + r[1] + r[2]) / 3));
  close(nums(out.max0), [0, 1, 2].map((j) => Math.max(X[j], X[3 + j])));
  close(nums(out.lse), lse);
  close(nums(out.all), [X.reduce((s, v) => s + v, 0)]);
});

Deno.test("Gather, Reshape, Transpose, Concat, Split, Slice, Unsqueeze, Squeeze, Expand, Shape", async () => {
  const g = new GraphBuilder("shapes");
  const o = bindOps(g);
  const table = g.initializer("emb", new Float32Array([0, 1, 10, 11, 20, 21, 30, 31]), [4, 2]);
  const ids = g.input("ids", "int64", ["B", "T"]);
  const e = o.Gather(table, ids); // [B, T, 2]
  assert.deepEqual(e.shape, ["B", "T", 2]);
  g.output(e, "gather");
  const x = g.input("x", "float32", [2, 3]);
  const r = o.Reshape(x, [3, -1]);
  assert.deepEqual(r.shape, [3, 2]);
  g.output(o.Transpose(r, [1, 0]), "rt");
  const [left, right] = o.Split(x, [1, 2], 1);
  g.output(o.Concat([right, left], 1), "rotated");
  g.output(o.Slice(x, [0], [100], [1], [2]), "sliced");
  const u = o.Unsqueeze(x, [0, 3]);
  assert.deepEqual(u.shape, [1, 2, 3, 1]);
  g.output(o.Squeeze(o.Expand(u, [4, 1, 1, 1]), [3]), "expanded");
  g.output(o.Shape(e), "shape");
  const out = await run(g, { ids: i64([3, 0, 2, 2], [2, 2]), x: f32(X, [2, 3]) });
  assert.deepEqual(nums(out.gather), [30, 31, 0, 1, 20, 21, 20, 21]);
  assert.deepEqual(nums(out.rt), [X[0], X[2], X[4], X[1], X[3], X[5]]);
  assert.deepEqual(nums(out.rotated), [X[1], X[2], X[0], X[4], X[5], X[3]]);
  assert.deepEqual(nums(out.sliced), [X[0], X[2], X[3], X[5]]);
  assert.deepEqual(out.expanded.dims, [4, 2, 3]);
  assert.deepEqual(nums(out.expanded), [...X, ...X, ...X, ...X]);
  assert.deepEqual(nums(out.shape), [2, 2, 2]);
});

Deno.test("CumSum, TopK, ArgMax, GatherElements, Scatter (add accumulates duplicates)", async () => {
  const g = new GraphBuilder("index");
  const o = bindOps(g);
  const x = g.input("x", "float32", [2, 3]);
  g.output(o.CumSum(x, 1), "cumsum");
  g.output(o.CumSum(x, 1, { exclusive: true, reverse: true }), "cumrev");
  const [values, indices] = o.TopK(x, 2);
  g.output(values, "topv");
  g.output(indices, "topi");
  g.output(o.ArgMax(x, 1, { keepdims: false }), "argmax");
  const idx = g.constant(BigInt64Array.from([2n, 0n, 1n, 1n]), [2, 2]);
  g.output(o.GatherElements(x, idx, 1), "ge");
  const zeros = o.ConstantOfShape([2, 3], 0);
  g.output(
    o.ScatterElements(zeros, idx, g.constant(new Float32Array([1, 2, 3, 4]), [2, 2]), {
      axis: 1,
      reduction: "add",
    }),
    "se",
  );
  const nd = g.constant(BigInt64Array.from([1n, 0n, 1n]), [3, 1]);
  g.output(o.ScatterND(zeros, nd, g.constant(new Float32Array(9).fill(1), [3, 3]), "add"), "snd");
  const out = await run(g, { x: f32(X, [2, 3]) });
  close(nums(out.cumsum), [X[0], X[0] + X[1], X[0] + X[1] + X[2], X[3], X[3] + X[4], X[3] + X[4] + X[5]]);
  close(nums(out.cumrev), [X[1] + X[2], X[2], 0, X[4] + X[5], X[5], 0]);
  close(nums(out.topv), [2, 0.5, 1.5, 0.75]);
  assert.deepEqual(nums(out.topi), [2, 0, 1, 0]);
  assert.deepEqual(nums(out.argmax), [2, 1]);
  close(nums(out.ge), [X[2], X[0], X[4], X[4]]);
  close(nums(out.se), [2, 0, 1, 0, 7, 0]);
  close(nums(out.snd), [1, 1, 1, 2, 2, 2]);
});

Deno.test("Range, Trilu and ConstantOfShape build a causal mask", async () => {
  const g = new GraphBuilder("mask");
  const o = bindOps(g);
  const n = g.input("n", "int64", []);
  const r = o.Range(0, n, 1); // [n]
  assert.equal(r.dtype, "int64");
  g.output(r, "range");
  const shape = o.Concat([o.Unsqueeze(n, [0]), o.Unsqueeze(n, [0])], 0);
  const ones = o.ConstantOfShape(shape, 1);
  g.output(o.Trilu(ones, false), "lower");
  g.output(o.Trilu(ones, true, 1), "strictUpper");
  const out = await run(g, { n: i64([3], []) });
  assert.deepEqual(nums(out.range), [0, 1, 2]);
  assert.deepEqual(nums(out.lower), [1, 0, 0, 1, 1, 0, 1, 1, 1]);
  assert.deepEqual(nums(out.strictUpper), [0, 1, 1, 0, 0, 1, 0, 0, 0]);
});

Deno.test("If runs the branch its condition picks, using outer-scope values", async () => {
  const g = new GraphBuilder("if");
  const o = bindOps(g);
  const x = g.input("x", "float32", [3]);
  const flag = g.input("flag", "bool", []);
  const doubled = o.Mul(x, 2);
  const [y, z] = o.If(flag, (b) => [OPS.Add.emit(b, doubled, 1), x], (b) => [OPS.Neg.emit(b, x), doubled]);
  g.output(y, "y");
  g.output(z, "z");
  const session = await ort.InferenceSession.create(g.toModel());
  const xs = f32([1, 2, 3], [3]);
  const yes = await session.run({ x: xs, flag: new ort.Tensor("bool", new Uint8Array([1]), []) });
  const no = await session.run({ x: xs, flag: new ort.Tensor("bool", new Uint8Array([0]), []) });
  await session.release();
  assert.deepEqual(nums(yes.y), [3, 5, 7]);
  assert.deepEqual(nums(yes.z), [1, 2, 3]);
  assert.deepEqual(nums(no.y), [-1, -2, -3]);
  assert.deepEqual(nums(no.z), [2, 4, 6]);
});

Deno.test("Loop carries a running sum over N iterations and stacks scan outputs", async () => {
  const g = new GraphBuilder("loop");
  const o = bindOps(g);
  const n = g.input("n", "int64", []);
  const step = g.input("step", "float32", [2]);
  const start = o.Identity(g.vector([0, 100]));
  const { carried, scans } = o.Loop({
    trips: n,
    carried: [start],
    body: (b, iter, _cond, [acc]) => {
      const i = OPS.Cast.emit(b, iter, "float32");
      const next = OPS.Add.emit(b, acc, OPS.Mul.emit(b, step, i)); // acc + step * i
      return { carried: [next], scans: [next] };
    },
  });
  g.output(carried[0], "total");
  g.output(scans[0], "history");
  const out = await run(g, { n: i64([4], []), step: f32([1, -1], [2]) });
  // Σ_{i<4} i = 6.
  close(nums(out.total), [6, 94]);
  assert.deepEqual(out.history.dims, [4, 2]);
  close(nums(out.history), [0, 100, 1, 99, 3, 97, 6, 94]);
});

Deno.test("Loop stops when the body's condition turns false", async () => {
  const g = new GraphBuilder("while");
  const o = bindOps(g);
  const limit = g.input("limit", "float32", []);
  const { carried } = o.Loop({
    carried: [o.Identity(g.scalar(1))],
    body: (b, _iter, _cond, [x]) => {
      const next = OPS.Mul.emit(b, x, 2);
      return { cond: OPS.Less.emit(b, next, limit), carried: [next] };
    },
  });
  g.output(carried[0], "x");
  const out = await run(g, { limit: f32([50], []) });
  close(nums(out.x), [64]);
});

Deno.test("the op table names a missing op, and entries carry their domain", () => {
  assert.throws(() => opDefOf({ opType: "Conv", domain: "" }), /no entry for Conv/);
  assert.throws(() => opDefOf({ opType: "MatMul", domain: "com.microsoft" }), /com\.microsoft\.MatMul/);
  assert.equal(opDefOf({ opType: "GroupQueryAttention", domain: "com.microsoft" }).domain, "com.microsoft");
  assert.equal(OPS.GroupQueryAttention.grad, undefined, "fused generation ops have no gradient rule");
  assert.equal(typeof OPS.MatMul.grad, "function");
  const g = new GraphBuilder("n");
  const v: Value = OPS.Add.emit(g, g.input("a", "float32", [1]), 1);
  assert.equal(g.producer(v)?.opType, "Add");
});
