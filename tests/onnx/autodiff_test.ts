/**
 * The reverse walk (`backward`): which nodes it visits, how it adds up gradients, what it returns
 * without a path; and gradients of the compose.ts composites and a small LoRA MLP against finite
 * differences (float64, 1e-6 relative; see `helpers/grad_check.ts`).
 *
 * Dimension legend: B batch, T query length, S key length, H query heads, Hkv key/value heads,
 * D head dim, E features, R LoRA rank.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { backward } from "../../lib/onnx/autodiff.ts";
import { GraphBuilder, type Value } from "../../lib/onnx/builder.ts";
import { attention, logSoftmax, repeatKv, rmsNorm, rope, swiglu } from "../../lib/onnx/compose.ts";
import { bindOps } from "../../lib/onnx/ops.ts";
import { detach } from "../../lib/onnx/detach.ts";
import { noteGradRegion } from "../../lib/onnx/grad_region.ts";
import { checkGrad, rand, runModel } from "../helpers/grad_check.ts";

/** Forward node names whose rules ran, read from the backward nodes' scopes (`<node>.grad/...`). */
function visited(g: GraphBuilder, from: number): Set<string> {
  return new Set(g.nodes.slice(from).map((n) => n.name.split(".grad/")[0]));
}

function f64(data: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor("float64", Float64Array.from(data), dims);
}

Deno.test("backward visits only the nodes between wrt and the seeds", () => {
  const g = new GraphBuilder("paths");
  const o = bindOps(g);
  const x = g.input("x", "float64", [3]);
  const c = g.input("c", "float64", [3]);
  const scale = g.scope("scale", () => o.Exp(c)); // does not depend on x
  g.scope("dead", () => o.Sin(x)); // depends on x, reaches no seed
  const y = g.scope("y", () => o.Mul(o.Tanh(x), scale));
  const before = g.nodes.length;
  const [dx, dc] = backward(g, [{ value: y, grad: y }], [x, c]);
  assert.ok(dx && dc);
  assert.deepEqual([...visited(g, before)].sort(), ["scale/Exp", "y/Mul", "y/Tanh"]);
  const before2 = g.nodes.length;
  backward(g, [{ value: y, grad: y }], [x]);
  assert.deepEqual(
    [...visited(g, before2)].sort(),
    ["y/Mul", "y/Tanh"],
    "c's side is skipped when only x is wanted",
  );
});

Deno.test("backward sums the gradients of a value used several times in one Sum node", async () => {
  const g = new GraphBuilder("fanout");
  const o = bindOps(g);
  const x = g.input("x", "float64", [3]);
  const y = o.Add(o.Add(o.Mul(x, 2), o.Exp(x)), o.Mul(x, x)); // 2x + eˣ + x²
  const [dx] = backward(g, [{ value: y, grad: g.constant(new Float64Array([1, 1, 1]), [3]) }], [x]);
  const sums = g.nodes.filter((n) => n.opType === "Sum");
  assert.equal(sums.length, 1);
  assert.equal(sums[0].inputs.length, 4, "Mul(x, 2), Exp and both operands of Mul(x, x)");
  assert.equal(sums[0].outputs[0].name, dx!.name);
  g.output(dx!, "dx");
  const xs = [0.5, -1, 2];
  const out = await runModel(g, { x: f64(xs, [3]) });
  const expected = xs.map((v) => 2 + Math.exp(v) + 2 * v);
  Array.from(out.dx.data as Float64Array).forEach((v, i) => assert.ok(Math.abs(v - expected[i]) < 1e-12));
});

Deno.test("gradients from several seeds add up; a wrt without a path gets null", async () => {
  const g = new GraphBuilder("seeds");
  const o = bindOps(g);
  const x = g.input("x", "float64", [2]);
  const unused = g.input("unused", "float64", [2]);
  const ones = g.constant(new Float64Array([1, 1]), [2]);
  const [dx, du] = backward(g, [{ value: o.Mul(x, 2), grad: ones }, { value: o.Mul(x, 3), grad: ones }], [
    x,
    unused,
  ]);
  assert.equal(du, null);
  g.output(dx!, "dx");
  const out = await runModel(g, { x: f64([1, 2], [2]), unused: f64([0, 0], [2]) });
  assert.deepEqual(Array.from(out.dx.data as Float64Array), [5, 5]);
});

Deno.test("an intermediate value as wrt gets its total gradient", async () => {
  const g = new GraphBuilder("inner");
  const o = bindOps(g);
  const x = g.input("x", "float64", [2]);
  const h = o.Mul(x, 3);
  const y = o.Add(o.Mul(h, h), x); // h² + x
  const [dh, dx] = backward(g, [{ value: y, grad: g.constant(new Float64Array([1, 1]), [2]) }], [h, x]);
  g.output(dh!, "dh");
  g.output(dx!, "dx");
  const out = await runModel(g, { x: f64([1, -2], [2]) });
  assert.deepEqual(Array.from(out.dh.data as Float64Array), [6, -12]); // 2h
  assert.deepEqual(Array.from(out.dx.data as Float64Array), [19, -35]); // 2h·3 + 1 = 18x + 1
});

Deno.test("detach passes the value and stops the gradient (GSPO's exp(c + x − detach(x)) has gradient e^c)", async () => {
  const g = new GraphBuilder("detach");
  const o = bindOps(g);
  const x = g.input("x", "float64", [3]);
  const c = g.input("c", "float64", [3]);
  const product = o.Mul(x, detach(g, o.Exp(x))); // value x·eˣ, gradient eˣ
  const tied = o.Exp(o.Add(c, o.Sub(x, detach(g, x)))); // value eᶜ, gradient eᶜ
  const ones = g.constant(new Float64Array([1, 1, 1]), [3]);
  const [dx] = backward(g, [{ value: product, grad: ones }], [x]);
  const [dTied] = backward(g, [{ value: tied, grad: ones }], [x]);
  const [dOnly] = backward(g, [{ value: detach(g, o.Exp(x)), grad: ones }], [x]);
  assert.equal(dOnly, null, "no gradient reaches x through detach alone");
  g.output(product, "product");
  g.output(tied, "tied");
  g.output(dx!, "dx");
  g.output(dTied!, "dTied");
  const xs = [0.5, -1, 2], cs = [0.1, -0.3, 0.7];
  const out = await runModel(g, { x: f64(xs, [3]), c: f64(cs, [3]) });
  const close = (name: string, expected: number[]) =>
    Array.from(out[name].data as Float64Array).forEach((v, i) =>
      assert.ok(Math.abs(v - expected[i]) < 1e-12, `${name}[${i}] ${v}, expected ${expected[i]}`)
    );
  close("product", xs.map((v) => v * Math.exp(v)));
  close("dx", xs.map((v) => Math.exp(v)));
  close("tied", cs.map((v) => Math.exp(v)));
  close("dTied", cs.map((v) => Math.exp(v)));
});

Deno.test("a contrib op off the path needs no rule; on the path it is named", () => {
  const g = new GraphBuilder("contrib");
  const o = bindOps(g);
  const x = g.input("x", "float32", [1, 2, 16]); // [B, T, H*D]
  const attend = (q: Value) =>
    o.GroupQueryAttention({
      query: q,
      key: q,
      value: q,
      seqlensK: g.constant(Int32Array.from([1]), [1]),
      totalSequenceLength: g.constant(Int32Array.from([2]), []),
    }, { numHeads: 2, kvNumHeads: 2 })[0];
  const y = o.Mul(x, o.Reshape(attend(g.input("other", "float32", [1, 2, 16])), [1, 2, 16]));
  assert.ok(backward(g, [{ value: y, grad: y }], [x])[0], "the attention does not depend on x");
  const z = g.scope("attn", () => attend(x));
  assert.throws(
    () => backward(g, [{ value: z, grad: z }], [x]),
    /^Error: autodiff: no gradient rule for com\.microsoft\.GroupQueryAttention \(node attn\/GroupQueryAttention\);/,
  );
});

Deno.test("LoRA: frozen weights and inputs get no backward nodes", () => {
  const g = new GraphBuilder("lora");
  const o = bindOps(g);
  const x = g.input("x", "float32", ["B", "T", 8]); // [B, T, E]
  const w = g.initializer("w", new Float32Array(8 * 8), [8, 8]); // frozen [E, E]
  const a = g.input("lora_a", "float32", [8, 2]); // [E, R]
  const b = g.input("lora_b", "float32", [2, 8]); // [R, E]
  const y = o.Add(o.MatMul(x, w), o.Mul(o.MatMul(o.MatMul(x, a), b), 0.5)); // [B, T, E]
  const before = g.nodes.length;
  const grads = backward(g, [{ value: y, grad: y }], [a, b]);
  assert.ok(grads.every((d) => d));
  const added = g.nodes.slice(before);
  assert.ok(!added.some((n) => n.inputs.some((v) => v?.name === "w")), "nothing reads the frozen weight");
  assert.ok(!visited(g, before).has("MatMul"), "the x @ w node is not visited");
});

Deno.test("rmsNorm, swiglu and logSoftmax match finite differences", async (t) => {
  await t.step(
    "rmsNorm over [B, T, E] with its weight",
    () =>
      checkGrad(
        { x: rand([2, 3, 4], 1, 2, ["B", "T", 4]), w: rand([4], 2) },
        (g, v) => rmsNorm(g, v.x, v.w, 1e-6),
      ),
  );
  await t.step(
    "swiglu",
    () => checkGrad({ gate: rand([2, 5], 1, 3), up: rand([2, 5], 2) }, (g, v) => swiglu(g, v.gate, v.up)),
  );
  await t.step(
    "logSoftmax, last axis",
    () => checkGrad({ x: rand([2, 5], 1, 3) }, (g, v) => logSoftmax(g, v.x)),
  );
  await t.step(
    "logSoftmax, axis 0",
    () => checkGrad({ x: rand([3, 2], 1, 3) }, (g, v) => logSoftmax(g, v.x, 0)),
  );
});

Deno.test("rope and repeatKv match finite differences with symbolic batch and length", async (t) => {
  const [T, D] = [3, 4];
  const angles = Array.from({ length: T * D }, (_, i) => Math.floor(i / D) * 0.7 ** (i % (D / 2)));
  const cos = { data: angles.map(Math.cos), dims: [1, 1, T, D], decl: [1, 1, "T", D], frozen: true };
  const sin = { data: angles.map(Math.sin), dims: [1, 1, T, D], decl: [1, 1, "T", D], frozen: true };
  await t.step("rope", () =>
    checkGrad(
      { x: rand([2, 2, T, D], 1, 1, ["B", 2, "T", D]), cos, sin },
      (g, v) => rope(g, v.x, v.cos, v.sin, D),
    ));
  await t.step(
    "repeatKv",
    () => checkGrad({ x: rand([2, 2, T, D], 1, 1, ["B", 2, "S", D]) }, (g, v) => repeatKv(g, v.x, 2, D)),
  );
});

Deno.test("causal attention with an additive bias and repeated KV heads matches finite differences", async () => {
  const [T, D] = [3, 4];
  const mask = Array.from({ length: T * T }, (_, i) => (i % T > Math.floor(i / T) ? -1e9 : 0)); // [T, T]
  await checkGrad({
    q: rand([1, 2, T, D], 1, 1, ["B", 2, "T", D]),
    k: rand([1, 1, T, D], 2, 1, ["B", 1, "T", D]),
    v: rand([1, 1, T, D], 3, 1, ["B", 1, "T", D]),
    bias: { data: mask, dims: [1, 1, T, T], decl: [1, 1, "T", "T"], frozen: true },
  }, (g, x) => attention(g, x.q, repeatKv(g, x.k, 2, D), repeatKv(g, x.v, 2, D), D, { bias: x.bias }));
});

Deno.test("attention's softmax span: the bias's gradient, and a scale other than 1, match finite differences", async () => {
  const [T, D] = [3, 4];
  await checkGrad({
    q: rand([1, 2, T, D], 4, 1, ["B", 2, "T", D]),
    k: rand([1, 2, T, D], 5, 1, ["B", 2, "T", D]),
    v: rand([1, 2, T, D], 6, 1, ["B", 2, "T", D]),
    bias: rand([1, 1, T, T], 7, 1, [1, 1, "T", "T"]), // learned: its gradient sums over the heads
  }, (g, x) => attention(g, x.q, x.k, x.v, D, { bias: x.bias, scale: 0.7 }));
});

Deno.test("in float16 the softmax span's gradient is one rule in float16: no Cast in the backward", () => {
  const g = new GraphBuilder("half");
  const [q, k, v] = ["q", "k", "v"].map((n) => g.input(n, "float16", [1, 2, 3, 4]));
  const bias = g.input("bias", "float32", [3, 3]);
  const out = attention(g, q, k, v, 4, { bias });
  const forward = g.nodes.length;
  const grads = backward(g, [{ value: out, grad: out }], [q, k, v]);
  const backwardOps = g.nodes.slice(forward).map((n) => n.opType);
  assert.deepEqual(
    g.nodes.slice(0, forward).filter((n) => n.opType === "Cast").length,
    2,
    "scores up, weights down",
  );
  assert.ok(!backwardOps.includes("Cast"), `backward ops: ${backwardOps.join(", ")}`);
  assert.ok(!backwardOps.includes("Softmax"), "no rule of the span's own nodes ran");
  assert.deepEqual(grads.map((d) => d?.dtype), ["float16", "float16", "float16"]);
});

Deno.test("a gradient region's inner values cannot take a gradient from outside, nor its rule read one from before", () => {
  const build = (readInner: boolean, readBefore: boolean) => {
    const g = new GraphBuilder("region");
    const o = bindOps(g);
    const x = g.input("x", "float32", [2]);
    const before = o.Exp(x); // [2]
    const start = g.nodes.length;
    const inner = o.Mul(before, 2); // [2]
    const y = o.Mul(inner, 3); // [2]
    noteGradRegion(g, {
      nodes: g.nodes.slice(start),
      inputs: [before],
      outputs: [y],
      grad: (ctx) => [readBefore ? ctx.gradOf(before) : o.Mul(ctx.grads[0]!, 6)],
    });
    const loss = readInner ? o.Add(y, inner) : y;
    return backward(g, [{ value: loss, grad: loss }], [x]);
  };
  assert.ok(build(false, false)[0]);
  assert.throws(() => build(true, false), /lies inside a gradient region .* read only the region's outputs/);
  assert.throws(() => build(false, true), /read the gradient of .*, which is not computed after it/);
});

Deno.test("the keys' gradient through q @ kᵀ costs one Transpose, not a transposed product transposed back", () => {
  const g = new GraphBuilder("scores");
  const o = bindOps(g);
  const q = g.input("q", "float32", [1, 2, 3, 4]);
  const k = g.input("k", "float32", [1, 2, 5, 4]);
  const scores = o.MatMul(q, o.Transpose(k, [0, 1, 3, 2])); // [1, 2, 3, 5]
  const [dq, dk] = backward(g, [{ value: scores, grad: scores }], [q, k]);
  g.output(dq!, "dq");
  g.output(dk!, "dk");
  const transposes = g.toGraph().nodes.filter((n) => n.opType === "Transpose");
  assert.equal(transposes.length, 2, "kᵀ forward, and the scores' gradient for dk = dyᵀ @ q");
});

Deno.test("a 2-layer MLP with LoRA adapters on frozen weights matches finite differences", async () => {
  const [E, F, R] = [4, 6, 2];
  const frozen = (dims: number[], seed: number) => ({ ...rand(dims, seed), frozen: true });
  await checkGrad({
    x: { ...rand([2, 3, E], 1, 1, ["B", "T", E]), frozen: true },
    w1: frozen([F, E], 2), // [out, in] as stored by Hugging Face
    w2: frozen([E, F], 3),
    a1: rand([R, E], 4), // [R, in]
    b1: rand([F, R], 5), // [out, R]
    a2: rand([R, F], 6),
    b2: rand([E, R], 7),
  }, (g, v) => {
    const o = bindOps(g);
    const linear = (x: Value, w: Value, a: Value, b: Value) => {
      const base = o.MatMul(x, o.Transpose(w)); // [B, T, out]
      const low = o.MatMul(o.MatMul(x, o.Transpose(a)), o.Transpose(b)); // [B, T, out]
      return o.Add(base, o.Mul(low, 2)); // [B, T, out]
    };
    const h = linear(v.x, v.w1, v.a1, v.b1); // [B, T, F]
    const act = o.Mul(h, o.Sigmoid(h)); // [B, T, F]
    return linear(act, v.w2, v.a2, v.b2); // [B, T, E]
  });
});

Deno.test("a Gemm Linear with a LoRA branch: dX = dY·W + dU·A is one Gemm (no Sum), and matches finite differences", async () => {
  const [N, E, F, R] = [3, 4, 5, 2];
  const linear = (g: GraphBuilder, v: Record<string, Value>) => {
    const o = bindOps(g);
    const u = o.Gemm(v.x, v.a, null, { transB: true }); // [N, R]
    return o.Gemm(u, v.b, o.Gemm(v.x, v.w, null, { transB: true }), { transB: true }); // [N, F]
  };
  const inputs = {
    x: rand([N, E], 1),
    w: { ...rand([F, E], 2), frozen: true },
    a: rand([R, E], 3),
    b: rand([F, R], 4),
  };
  await checkGrad(inputs, linear);
  const g = new GraphBuilder("lora_linear");
  const v = Object.fromEntries(Object.entries(inputs).map(([n, x]) => [n, g.input(n, "float64", x.dims)]));
  const y = linear(g, v);
  const forward = g.nodes.length;
  backward(g, [{ value: y, grad: g.input("seed", "float64", [N, F]) }], [v.x, v.a, v.b]);
  const walk = g.nodes.slice(forward);
  assert.deepEqual(walk.filter((n) => n.opType === "Sum" || n.opType === "Add"), []);
  assert.equal(
    walk.filter((n) => n.opType === "Gemm" && n.inputs[2]).length,
    1,
    "one Gemm adds the other part",
  );
});

Deno.test("SiLU x·Sigmoid(x) is differentiated as one function (four kernels), also where σ reaches the loss another way", async () => {
  const silu = (g: GraphBuilder, v: Record<string, Value>) => {
    const o = bindOps(g);
    return o.Mul(v.x, o.Sigmoid(v.x)); // [2, 5]
  };
  await checkGrad({ x: rand([2, 5], 21, 3) }, silu);
  await checkGrad({ x: rand([2, 5], 22, 3) }, (g, v) => {
    const o = bindOps(g);
    const sigma = o.Sigmoid(v.x);
    return o.Add(o.Mul(v.x, sigma), o.Mul(sigma, 3)); // σ also reaches the loss through its own product
  });
  const g = new GraphBuilder("silu");
  const x = g.input("x", "float64", [2, 5]);
  const y = silu(g, { x });
  const forward = g.nodes.length;
  backward(g, [{ value: y, grad: g.input("seed", "float64", [2, 5]) }], [x]);
  assert.deepEqual(g.nodes.slice(forward).map((n) => n.opType), ["Mul", "Sub", "Add", "Mul"]);
});
