/**
 * Every gradient rule of the op table against central finite differences, through onnxruntime (CPU).
 *
 * Graphs are float64 wherever onnxruntime's CPU provider has double kernels, so the tolerance is
 * 1e-6 relative (see `helpers/grad_check.ts`). Inputs sit away from kinks (Abs at 0, Clip bounds,
 * ties of Max) so that finite differences are meaningful; tie handling is checked by value.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { backward } from "../../lib/onnx/autodiff.ts";
import { GraphBuilder, type Value } from "../../lib/onnx/builder.ts";
import { intsInput, type OpDef } from "../../lib/onnx/op_def.ts";
import { bindOps, OPS } from "../../lib/onnx/ops.ts";
import { repeatKv } from "../../lib/onnx/compose.ts";
import { checkGrad, type CheckInput, rand, runModel } from "../helpers/grad_check.ts";

/** Noise shifted away from zero: magnitudes in [0.5, 1.5). */
function away(dims: number[], seed: number, decl?: (number | string)[]): CheckInput {
  const x = rand(dims, seed, 1, decl);
  return { ...x, data: x.data.map((v) => Math.sign(v || 1) * (0.5 + Math.abs(v))) };
}

/** Noise in [0.5, 2). */
function positive(dims: number[], seed: number): CheckInput {
  return { ...rand(dims, seed), data: rand(dims, seed).data.map((v) => 1.25 + 0.75 * v) };
}

/** An int64 constant. */
function ids(g: GraphBuilder, values: number[], dims: number[]): Value {
  return g.constant(BigInt64Array.from(values, BigInt), dims);
}

/** Gradients of `Σ seed · y` w.r.t. `wrt` for a one-input graph, evaluated at `data`. */
async function gradAt(
  data: number[],
  dims: number[],
  build: (g: GraphBuilder, x: Value) => Value,
  seed: number[],
): Promise<number[]> {
  const g = new GraphBuilder("direct");
  const x = g.input("x", "float64", dims);
  const y = build(g, x);
  const [dx] = backward(g, [{ value: y, grad: g.constant(Float64Array.from(seed), y.shape as number[]) }], [
    x,
  ]);
  g.output(dx!, "dx");
  const out = await runModel(g, { x: new ort.Tensor("float64", Float64Array.from(data), dims) });
  return Array.from(out.dx.data as Float64Array);
}

Deno.test("unary rules match finite differences", async (t) => {
  const cases: [string, CheckInput, (o: ReturnType<typeof bindOps>, x: Value) => Value][] = [
    ["Identity", rand([2, 3], 1), (o, x) => o.Identity(x)],
    ["Neg", rand([2, 3], 1), (o, x) => o.Neg(x)],
    ["Abs", away([2, 3], 1), (o, x) => o.Abs(x)],
    ["Sqrt", positive([2, 3], 1), (o, x) => o.Sqrt(x)],
    ["Reciprocal", away([2, 3], 1), (o, x) => o.Reciprocal(x)],
    ["Exp", rand([2, 3], 1), (o, x) => o.Exp(x)],
    ["Log", positive([2, 3], 1), (o, x) => o.Log(x)],
    ["Tanh", rand([2, 3], 1, 2), (o, x) => o.Tanh(x)],
    ["Sigmoid", rand([2, 3], 1, 3), (o, x) => o.Sigmoid(x)],
    ["Sin", rand([2, 3], 1, 3), (o, x) => o.Sin(x)],
    ["Cos", rand([2, 3], 1, 3), (o, x) => o.Cos(x)],
  ];
  for (const [name, input, f] of cases) {
    await t.step(name, () => checkGrad({ x: input }, (g, { x }) => f(bindOps(g), x)));
  }
});

Deno.test("Erf matches finite differences in float32 (CPU has no double Erf kernel)", async () => {
  // float32 outputs carry ~6e-8 relative error; with eps 1e-2 the difference quotient keeps ~1e-5,
  // and the O(eps²) truncation term of erf (|f'''| ≤ 2.3) stays below 4e-5: 2e-3 leaves margin.
  await checkGrad({ x: rand([2, 3], 1, 1.5) }, (g, { x }) => bindOps(g).Erf(x), { dtype: "float32" });
});

Deno.test("Add, Sub, Mul, Div, Pow sum gradients back to broadcast operands", async (t) => {
  const shapes: [string, CheckInput, CheckInput][] = [
    ["[2,3] by [3]", rand([2, 3], 1), away([3], 2)],
    ["[2,1] by [1,3]", rand([2, 1], 1), away([1, 3], 2)],
    ["[2,3,4] by [3,1]", rand([2, 3, 4], 1), away([3, 1], 2)],
    ["[2,3] by a rank-0 scalar", rand([2, 3], 1), away([], 2)],
    ["[B,3] by [B,3] (same symbols)", rand([2, 3], 1, 1, ["B", 3]), away([2, 3], 2, ["B", 3])],
    ["[B,T,4] by [4]", rand([2, 3, 4], 1, 1, ["B", "T", 4]), away([4], 2)],
  ];
  for (const [label, a, b] of shapes) {
    await t.step(`Add ${label}`, () => checkGrad({ a, b }, (g, v) => bindOps(g).Add(v.a, v.b)));
    await t.step(`Sub ${label}`, () => checkGrad({ a, b }, (g, v) => bindOps(g).Sub(v.b, v.a)));
    await t.step(`Mul ${label}`, () => checkGrad({ a, b }, (g, v) => bindOps(g).Mul(v.a, v.b)));
    await t.step(`Div ${label}`, () => checkGrad({ a, b }, (g, v) => bindOps(g).Div(v.a, v.b)));
  }
  await t.step(
    "Pow with a broadcast exponent",
    () => checkGrad({ a: positive([2, 3], 1), b: rand([3], 2) }, (g, v) => bindOps(g).Pow(v.a, v.b)),
  );
  await t.step(
    "Pow by a constant",
    () => checkGrad({ a: rand([2, 3], 1) }, (g, v) => bindOps(g).Pow(v.a, 3)),
  );
});

Deno.test("a value used twice accumulates both gradients", async () => {
  await checkGrad({ x: rand([2, 3], 1) }, (g, { x }) => bindOps(g).Mul(x, x));
  await checkGrad({ x: positive([3], 1) }, (g, { x }) => {
    const o = bindOps(g);
    return o.Add(o.Mul(o.Log(x), x), o.Div(o.Exp(x), x));
  });
});

Deno.test("broadcasting against an operand of unknown shape is an error naming the node", () => {
  const g = new GraphBuilder("unknown");
  const o = bindOps(g);
  const x = g.input("x", "float64"); // no dims
  const b = g.input("b", "float64", [3]);
  const y = g.scope("block", () => o.Add(x, b));
  assert.throws(
    () => backward(g, [{ value: y, grad: y }], [b]),
    /^Error: autodiff: Add \(node block\/Add\): cannot tell which axes of b \(shape \[3\]\) were broadcast to unknown; declare graph inputs with dims/,
  );
});

Deno.test("Max, Min and Sum route gradients to their inputs, with broadcasting", async () => {
  const inputs = { a: rand([2, 3], 1), b: rand([3], 2), c: rand([2, 1], 3) };
  await checkGrad(inputs, (g, v) => bindOps(g).Max(v.a, v.b, v.c));
  await checkGrad(inputs, (g, v) => bindOps(g).Min(v.a, v.b, v.c));
  await checkGrad(inputs, (g, v) => bindOps(g).Sum(v.a, v.b, v.c));
  await checkGrad({ a: away([2, 3], 4) }, (g, v) => bindOps(g).Max(v.a, 0)); // ReLU
});

Deno.test("Max splits the gradient equally between tied inputs", async () => {
  const dx = await gradAt([1, 2, 3], [3], (g, x) => bindOps(g).Max(x, g.vector([1, 5, 3], "float64")), [
    1,
    1,
    1,
  ]);
  assert.deepEqual(dx, [0.5, 0, 0.5]);
});

Deno.test("Where sends the gradient to the picked branch; the condition gets none", async () => {
  const inputs = { a: rand([2, 3], 1), b: rand([3], 2), c: { ...away([2, 3], 3), frozen: true } };
  await checkGrad(inputs, (g, v) => {
    const o = bindOps(g);
    return o.Where(o.Greater(v.c, 0), v.a, v.b);
  });
});

Deno.test("Clip passes the gradient inside the bounds only", async () => {
  const x = { x: rand([4, 3], 1, 2) }; // entries between ±0.5 and ±2, none at ±0.7
  await checkGrad(x, (g, v) => bindOps(g).Clip(v.x, -0.7, 0.7));
  await checkGrad(x, (g, v) => bindOps(g).Clip(v.x, null, 0.7));
  await checkGrad(x, (g, v) => bindOps(g).Clip(v.x, -0.7, null));
});

Deno.test("Cast between floats casts the gradient back; a cast to int carries none", async () => {
  // The middle of this graph is float32: finite differences need a float32-sized step (1e-2) and a
  // float32-sized tolerance (rounding of ~6e-8 · |L| / eps, plus an O(eps²) term of the tanh).
  await checkGrad({ x: rand([2, 3], 1) }, (g, { x }) => {
    const o = bindOps(g);
    return o.Cast(o.Tanh(o.Cast(x, "float32")), "float64");
  }, { eps: 1e-2, tol: 1e-3 });
  const g = new GraphBuilder("int");
  const o = bindOps(g);
  const x = g.input("x", "float64", [3]);
  const y = o.Cast(o.Cast(x, "int64"), "float64");
  const before = g.nodes.length;
  assert.deepEqual(backward(g, [{ value: y, grad: y }], [x]), [null]);
  assert.equal(g.nodes.length, before, "no backward nodes");
});

Deno.test("MatMul: matrices, linear layers, attention shapes, broadcast batches and vectors", async (t) => {
  const cases: [string, CheckInput, CheckInput][] = [
    ["[3,4]@[4,2]", rand([3, 4], 1), rand([4, 2], 2)],
    ["[B,T,4]@[4,5] (symbolic)", rand([2, 3, 4], 1, 1, ["B", "T", 4]), rand([4, 5], 2)],
    ["[2,3,4]@[4,5]", rand([2, 3, 4], 1), rand([4, 5], 2)],
    [
      "[B,H,T,D]@[B,H,D,S]",
      rand([2, 2, 3, 4], 1, 1, ["B", 2, "T", 4]),
      rand([2, 2, 4, 3], 2, 1, ["B", 2, 4, "T"]),
    ],
    ["[2,1,3,4]@[3,4,5] (batch broadcast)", rand([2, 1, 3, 4], 1), rand([3, 4, 5], 2)],
    ["[3,4]@[2,4,5] (matrix broadcast)", rand([3, 4], 1), rand([2, 4, 5], 2)],
    ["[4]@[4,5]", rand([4], 1), rand([4, 5], 2)],
    ["[2,3,4]@[4]", rand([2, 3, 4], 1), rand([4], 2)],
    ["[4]@[2,4,5]", rand([4], 1), rand([2, 4, 5], 2)],
    ["[4]@[4]", rand([4], 1), rand([4], 2)],
  ];
  for (const [label, a, b] of cases) {
    await t.step(label, () => checkGrad({ a, b }, (g, v) => bindOps(g).MatMul(v.a, v.b)));
  }
  await t.step(
    "q @ Transpose(k) reads k through the transpose",
    () =>
      checkGrad({ q: rand([1, 2, 3, 4], 1), k: rand([1, 2, 5, 4], 2) }, (g, v) => {
        const o = bindOps(g);
        return o.MatMul(v.q, o.Transpose(v.k, [0, 1, 3, 2]));
      }),
  );
});

Deno.test("Gemm with alpha, beta, transA, transB and a broadcast bias", async (t) => {
  for (const transA of [false, true]) {
    for (const transB of [false, true]) {
      const a = rand(transA ? [4, 3] : [3, 4], 1);
      const b = rand(transB ? [5, 4] : [4, 5], 2);
      await t.step(
        `transA=${transA} transB=${transB}`,
        () =>
          checkGrad(
            { a, b, c: rand([5], 3) },
            (g, v) => bindOps(g).Gemm(v.a, v.b, v.c, { alpha: 0.7, beta: 1.3, transA, transB }),
          ),
      );
    }
  }
  for (const dims of [[], [1, 5], [3, 1], [3, 5]]) {
    await t.step(
      `bias [${dims}]`,
      () =>
        checkGrad(
          { a: rand([3, 4], 1), b: rand([4, 5], 2), c: rand(dims, 3) },
          (g, v) => bindOps(g).Gemm(v.a, v.b, v.c, { beta: 0.5 }),
        ),
    );
  }
});

Deno.test("Softmax and LogSoftmax along any axis", async (t) => {
  for (const axis of [0, 1, -1]) {
    await t.step(
      `Softmax axis ${axis}`,
      () => checkGrad({ x: rand([2, 3, 4], 1, 2) }, (g, { x }) => bindOps(g).Softmax(x, axis)),
    );
    await t.step(
      `LogSoftmax axis ${axis}`,
      () => checkGrad({ x: rand([2, 3, 4], 2, 2) }, (g, { x }) => bindOps(g).LogSoftmax(x, axis)),
    );
  }
});

Deno.test("reductions with keepdims on and off, negative axes, all axes and symbolic dims", async (t) => {
  const ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceLogSumExp"] as const;
  const configs: [string, number[] | undefined, boolean, CheckInput][] = [
    ["axis 1 keepdims", [1], true, rand([2, 3, 4], 1)],
    ["axis -1 dropped", [-1], false, rand([2, 3, 4], 1)],
    ["axes [0, 2] dropped", [0, 2], false, rand([2, 3, 4], 1)],
    ["all axes dropped", undefined, false, rand([2, 3, 4], 1)],
    ["all axes kept", undefined, true, rand([2, 3, 4], 1)],
    ["axis -2 of [B, T, 4]", [-2], false, rand([2, 3, 4], 1, 1, ["B", "T", 4])],
  ];
  for (const op of ops) {
    for (const [label, axes, keepdims, x] of configs) {
      await t.step(
        `${op} ${label}`,
        () => checkGrad({ x }, (g, v) => bindOps(g)[op](v.x, axes, { keepdims })),
      );
    }
  }
});

Deno.test("ReduceMax gives tied maxima equal shares of the gradient", async () => {
  const dx = await gradAt(
    [3, 1, 3, 2, 2, 0],
    [2, 3],
    (g, x) => bindOps(g).ReduceMax(x, [1], { keepdims: false }),
    [
      1,
      4,
    ],
  );
  assert.deepEqual(dx, [0.5, 0, 0.5, 2, 2, 0]);
});

Deno.test("Reshape, Transpose, Unsqueeze, Squeeze and Expand", async (t) => {
  const x = rand([2, 3, 4], 1);
  const sym = rand([2, 3, 4], 1, 1, ["B", 3, 4]);
  const steps: [string, CheckInput, (o: ReturnType<typeof bindOps>, x: Value, g: GraphBuilder) => Value][] = [
    ["Reshape [6, -1]", x, (o, x) => o.Reshape(x, [6, -1])],
    ["Reshape [0, -1] of [B, 3, 4]", sym, (o, x) => o.Reshape(x, [0, -1])],
    ["Transpose [2, 0, 1]", x, (o, x) => o.Transpose(x, [2, 0, 1])],
    ["Transpose reversed", x, (o, x) => o.Transpose(x)],
    ["Unsqueeze [0, -1]", x, (o, x) => o.Unsqueeze(x, [0, -1])],
    ["Squeeze [1]", rand([2, 1, 4], 1), (o, x) => o.Squeeze(x, [1])],
    ["Expand [3, 1] to [2, 3, 4]", rand([3, 1], 1), (o, x) => o.Expand(x, [2, 3, 4])],
    [
      "Expand [B, 1, 4] by a computed shape",
      rand([2, 1, 4], 1, 1, ["B", 1, 4]),
      (o, x, g) => o.Expand(x, o.Mul(o.Shape(x), intsInput(g, [1, 3, 1]))),
    ],
  ];
  for (const [label, input, f] of steps) {
    await t.step(label, () => checkGrad({ x: input }, (g, v) => f(bindOps(g), v.x, g)));
  }
});

Deno.test("Expand to a shape that is not tracked is an error naming the node", () => {
  const g = new GraphBuilder("expand");
  const o = bindOps(g);
  const x = g.input("x", "float64", ["B", 1]);
  const y = o.Expand(x, g.input("shape", "int64", [2]));
  assert.throws(
    () => backward(g, [{ value: y, grad: y }], [x]),
    /autodiff: Expand \(node Expand\): cannot tell/,
  );
});

Deno.test("Concat and Split along negative axes; an unused Split output gives zeros", async () => {
  const inputs = { a: rand([2, 3], 1), b: rand([2, 1], 2), c: rand([2, 2], 3) };
  await checkGrad(inputs, (g, v) => bindOps(g).Concat([v.a, v.b, v.c], -1));
  await checkGrad({ x: rand([2, 5], 1) }, (g, v) => {
    const o = bindOps(g);
    const [left, , right] = o.Split(v.x, [2, 1, 2], -1);
    return o.Mul(left, right);
  });
  await checkGrad({ x: rand([4, 3], 1) }, (g, v) => bindOps(g).Split(v.x, { parts: 2 }, 0)[1]);
});

Deno.test("Concat of symbolic-length parts slices the gradient at run time", async () => {
  const inputs = { a: rand([2, 3], 1, 1, [2, "S"]), b: rand([2, 2], 2, 1, [2, "T"]) };
  await checkGrad(inputs, (g, v) => bindOps(g).Concat([v.a, v.b], 1));
});

Deno.test("Slice with static starts, ends, axes and steps, negative indices and symbolic dims", async (t) => {
  const x = rand([4, 6], 1);
  const sym = rand([4, 6], 1, 1, ["B", "T"]);
  const cases: [string, CheckInput, (o: ReturnType<typeof bindOps>, x: Value) => Value][] = [
    ["[1:3, 2:]", x, (o, x) => o.Slice(x, [1, 2], [3, 100])],
    ["[:, :-1] by axes [-1]", x, (o, x) => o.Slice(x, [0], [-1], [-1])],
    ["steps 2 and 3", x, (o, x) => o.Slice(x, [0, 1], [4, 6], [0, 1], [2, 3])],
    ["step 4 running past the end", x, (o, x) => o.Slice(x, [1], [6], [1], [4])],
    ["[B, T][:, 1:-1] (symbolic)", sym, (o, x) => o.Slice(x, [1], [-1], [1])],
    ["[B, T][-3:, ::2] (symbolic)", sym, (o, x) => o.Slice(x, [-3, 0], [100, 100], [0, 1], [1, 2])],
  ];
  for (const [label, input, f] of cases) {
    await t.step(label, () => checkGrad({ x: input }, (g, v) => f(bindOps(g), v.x)));
  }
});

Deno.test("Slice with a negative step has no gradient and says so", () => {
  const g = new GraphBuilder("rev");
  const x = g.input("x", "float64", [4]);
  const y = bindOps(g).Slice(x, [-1], [-100], [0], [-1]);
  assert.throws(
    () => backward(g, [{ value: y, grad: y }], [x]),
    /autodiff: Slice \(node Slice\): steps \[-1\]/,
  );
});

Deno.test("Pad and Trilu", async () => {
  await checkGrad({ x: rand([2, 3], 1) }, (g, v) => bindOps(g).Pad(v.x, [1, 0, 2, 3]));
  await checkGrad({ x: rand([2, 3], 1) }, (g, v) => bindOps(g).Pad(v.x, [2, 1], 0.5, [-1]));
  await checkGrad({ x: rand([3, 4], 1) }, (g, v) => bindOps(g).Trilu(v.x, false, 1));
});

Deno.test("Gather accumulates duplicate indices on any axis", async (t) => {
  const table = rand([5, 3], 1);
  await t.step(
    "embedding lookup with repeats",
    () => checkGrad({ table }, (g, v) => bindOps(g).Gather(v.table, ids(g, [4, 1, 4, 0, 4, 2], [2, 3]))),
  );
  await t.step(
    "negative indices",
    () => checkGrad({ table }, (g, v) => bindOps(g).Gather(v.table, ids(g, [-1, 0, -1], [3]))),
  );
  await t.step(
    "a scalar index",
    () => checkGrad({ table }, (g, v) => bindOps(g).Gather(v.table, ids(g, [3], []))),
  );
  await t.step(
    "axis 1 of [2, 4, 3]",
    () =>
      checkGrad({ x: rand([2, 4, 3], 2) }, (g, v) => bindOps(g).Gather(v.x, ids(g, [3, 0, 3, 3], [2, 2]), 1)),
  );
  await t.step(
    "axis -1 of [B, 4] (symbolic)",
    () =>
      checkGrad(
        { x: rand([2, 4], 2, 1, ["B", 4]) },
        (g, v) => bindOps(g).Gather(v.x, ids(g, [1, 1, 2], [3]), -1),
      ),
  );
});

Deno.test("GatherElements and GatherND accumulate duplicate indices", async () => {
  await checkGrad(
    { x: rand([2, 4], 1) },
    (g, v) => bindOps(g).GatherElements(v.x, ids(g, [3, 3, 0, 1, 1, 1], [2, 3]), 1),
  );
  await checkGrad({ x: rand([3, 2], 1) }, (g, v) => bindOps(g).GatherND(v.x, ids(g, [2, 0, 2], [3, 1])));
});

Deno.test("ScatterElements and ScatterND: data and updates gradients", async () => {
  const inputs = { data: rand([2, 4], 1), updates: rand([2, 2], 2) };
  for (const reduction of ["none", "add"] as const) {
    await checkGrad(
      inputs,
      (g, v) =>
        bindOps(g).ScatterElements(v.data, ids(g, [3, 1, 0, 2], [2, 2]), v.updates, { axis: 1, reduction }),
    );
    await checkGrad(
      { data: rand([3, 2], 1), updates: rand([2, 2], 2) },
      (g, v) => bindOps(g).ScatterND(v.data, ids(g, [2, 0], [2, 1]), v.updates, reduction),
    );
  }
});

Deno.test("CumSum forward and reverse, inclusive and exclusive", async (t) => {
  for (const exclusive of [false, true]) {
    for (const reverse of [false, true]) {
      await t.step(
        `exclusive=${exclusive} reverse=${reverse}`,
        () => checkGrad({ x: rand([2, 4], 1) }, (g, v) => bindOps(g).CumSum(v.x, -1, { exclusive, reverse })),
      );
    }
  }
});

Deno.test("TopK values send the gradient back to where they came from", async () => {
  await checkGrad({ x: rand([2, 5], 1) }, (g, v) => bindOps(g).TopK(v.x, 3)[0]);
  await checkGrad({ x: rand([4, 3], 1) }, (g, v) => bindOps(g).TopK(v.x, 2, { axis: 0, largest: false })[0]);
});

Deno.test("inputs without gradients (indices, shapes, conditions) get none", () => {
  const g = new GraphBuilder("nondiff");
  const o = bindOps(g);
  const x = g.input("x", "float64", [2, 3]);
  const viaShape = o.Cast(o.Shape(x), "float64"); // depends on x only through Shape
  const viaArgMax = o.Cast(o.ArgMax(x, 1), "float64");
  const viaFloor = o.Floor(x);
  for (const y of [viaShape, viaArgMax, viaFloor]) {
    assert.deepEqual(backward(g, [{ value: y, grad: y }], [x]), [null]);
  }
});

Deno.test("frozen weights get no gradient nodes, and dx reads the weight as stored", () => {
  const g = new GraphBuilder("frozen");
  const o = bindOps(g);
  const x = g.input("x", "float32", [4, 8]);
  const w = g.initializer("w", new Float32Array(6 * 8), [6, 8]); // [out, in], used with transB
  const h = o.Gemm(x, w, null, { transB: true }); // [4, 6]
  const before = g.nodes.length;
  const [dx] = backward(g, [{ value: h, grad: h }], [x]);
  const added = g.nodes.slice(before);
  assert.ok(dx);
  assert.deepEqual(added.map((n) => n.opType), ["Gemm"]);
  assert.equal(added[0].inputs[1]?.name, "w");
  assert.equal(added[0].attrs.transB.value, 0);
  assert.ok(!added.some((n) => n.inputs.some((v) => v?.name === "x")), "no node computes dW = dYᵀ x");
});

Deno.test("MatMul by a frozen [E, F] weight builds dx without a transposed copy and no dW", () => {
  const g = new GraphBuilder("linear");
  const o = bindOps(g);
  const x = g.input("x", "float32", ["B", "T", 8]);
  const w = g.initializer("w", new Float32Array(8 * 6), [8, 6]);
  const y = o.MatMul(x, w); // [B, T, 6]
  const before = g.nodes.length;
  backward(g, [{ value: y, grad: y }], [x]);
  const added = g.nodes.slice(before);
  assert.ok(!added.some((n) => n.opType === "Transpose"), "no transposed copy of w");
  assert.ok(!added.some((n) => n.inputs.some((v) => v?.name === "x") && n.opType !== "Shape"), "no dW");
});

Deno.test("RotaryEmbedding's rule (RoPE by the opposite angles) matches finite differences", async () => {
  const [P, D] = [6, 8];
  const angles = (f: (a: number) => number) =>
    Array.from({ length: P * D / 2 }, (_, k) => f(Math.floor(k / (D / 2)) * 0.7 ** (k % (D / 2))));
  const build = (g: GraphBuilder, v: Record<string, Value>) => {
    const o = bindOps(g);
    const cos = g.constant(Float32Array.from(angles(Math.cos)), [P, D / 2]);
    const sin = g.constant(Float32Array.from(angles(Math.sin)), [P, D / 2]);
    const positions = ids(g, [0, 3, 5, 1, 2, 4], [2, 3]); // [B, T], any order
    return o.RotaryEmbedding(v.x, positions, cos, sin, { numHeads: 2 }); // [2, 3, 2·D]
  };
  await checkGrad({ x: rand([2, 3, 2 * D], 21) }, build, { dtype: "float32" });
});

Deno.test("Loop, If and GroupQueryAttention have no rule: the walk names the op and node", () => {
  const g = new GraphBuilder("norule");
  const o = bindOps(g);
  const q = g.input("q", "float32", [1, 2, 16]);
  const kv = g.input("kv", "float32", [1, 2, 8]);
  const [attn] = g.scope("layers.0/attn", () =>
    o.GroupQueryAttention({
      query: q,
      key: kv,
      value: kv,
      seqlensK: g.constant(Int32Array.from([1]), [1]),
      totalSequenceLength: g.constant(Int32Array.from([2]), []),
    }, { numHeads: 2, kvNumHeads: 1 }));
  assert.throws(
    () => backward(g, [{ value: attn, grad: attn }], [q]),
    /^Error: autodiff: no gradient rule for com\.microsoft\.GroupQueryAttention \(node layers\.0\/attn\/GroupQueryAttention\); .*compose\.ts attention/,
  );
  const { carried } = o.Loop({
    trips: 2,
    carried: [o.Identity(g.scalar(0))],
    body: (b, _i, _c, [acc]) => ({ carried: [bindOps(b).Add(acc, o.ReduceSum(q))] }), // reads q from outside
  });
  assert.throws(
    () => backward(g, [{ value: carried[0], grad: carried[0] }], [q]),
    /no gradient rule for Loop \(node Loop\)/,
  );
  const conv = g.op("Conv", [q, kv]);
  assert.throws(
    () => backward(g, [{ value: conv, grad: conv }], [q]),
    /Conv \(node Conv\) \(the op table has no entry/,
  );
});

Deno.test("every op has a gradient rule or declares why not", () => {
  const withoutRule = Object.entries(OPS as Record<string, OpDef>).filter(([, d]) => !d.grad).map(([n]) => n);
  // No float gradient: every input is declared nondiff.
  const nondiff = [
    "Floor",
    "Sign",
    "Not",
    "Mod",
    "Equal",
    "Less",
    "LessOrEqual",
    "Greater",
    "GreaterOrEqual",
  ];
  nondiff.push("And", "Or", "ArgMax", "Shape", "ConstantOfShape", "Range");
  // Deliberately without a rule: the walk throws, naming them, when they lie on a path.
  const refused = ["Loop", "If", "GroupQueryAttention"];
  assert.deepEqual(withoutRule.sort(), [...nondiff, ...refused].sort());
  for (const name of nondiff) {
    const entry = (OPS as Record<string, OpDef>)[name];
    assert.ok(entry.nondiff && entry.nondiff.length > 0, `${name} declares its inputs nondiff`);
  }
});

Deno.test("emitters track the shapes gradient rules need, computed shape vectors included", () => {
  const g = new GraphBuilder("shapes");
  const o = bindOps(g);
  const x = g.input("x", "float32", ["B", 2, "S", 8]); // [B, Hkv, S, D]
  assert.deepEqual(repeatKv(g, x, 3, 8).shape, ["B", 6, "S", 8]);
  assert.deepEqual(o.Reshape(x, o.Concat([intsInput(g, [-1]), o.Shape(x, 1)], 0)).shape, ["B", 2, "S", 8]);
  assert.equal(o.Reshape(x, [0, -1, 8]).shape, undefined, "2·S is not one dim");
  assert.deepEqual(o.Slice(x, [1], [-1], [-1]).shape, ["B", 2, "S", 6]);
  assert.deepEqual(o.Slice(x, [0], [1], [0]).shape, undefined, "a symbolic dim sliced: unknown");
  assert.deepEqual(o.Split(x, { parts: 3 }, -1).map((v) => v.shape), [
    ["B", 2, "S", 3],
    ["B", 2, "S", 3],
    ["B", 2, "S", 2],
  ]);
  assert.deepEqual(
    o.Expand(o.Unsqueeze(x, [2]), o.Mul(o.Shape(o.Unsqueeze(x, [2])), intsInput(g, [1, 1, 4, 1, 1]))).shape,
    [
      "B",
      2,
      4,
      "S",
      8,
    ],
  );
  assert.deepEqual(o.Pad(x, [1, 2], 0, [-1]).shape, ["B", 2, "S", 11]);
});
