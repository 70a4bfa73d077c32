/**
 * onnxruntime's C API through Deno FFI (lib/ort): results equal the Node binding's, inputs and
 * pre-allocated outputs are the caller's own memory, ORT's errors come through, options take effect,
 * and a GroupQueryAttention decode step with past == present updates the cache in place.
 *
 * Tiny graphs made by code; both paths load the same libonnxruntime.so.1, so results must match exactly.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import { bindOps } from "../../lib/onnx/ops.ts";
import { ORT_API_INDEX, OrtError } from "../../lib/ort/api.ts";
import { libraryPath, openOrtLibrary, ORT_VERSION } from "../../lib/ort/library.ts";
import { OrtSession } from "../../lib/ort/session.ts";
import { OrtTensor, releaseCpuMemoryInfo } from "../../lib/ort/value.ts";
import { openEngineSession } from "../../lib/engine/session.ts";
import { mulberry32 } from "../reference/weights.ts";

function randoms(n: number, seed: number): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: n }, () => rand() * 2 - 1);
}

/** y = softmax(x·W + b) over the last axis, and n = the int64 count of rows with y[:, 0] > 0.3. */
function smallModel(): Uint8Array {
  const g = new GraphBuilder("small");
  const x = g.input("x", "float32", ["N", 4]);
  const w = g.initializer("w", randoms(12, 1), [4, 3]);
  const b = g.initializer("b", randoms(3, 2), [3]);
  const y = g.op("Softmax", [g.op("Add", [g.op("MatMul", [x, w]), b])], { axis: -1 }); // [N, 3]
  g.output(y, "y", ["N", 3]);
  const first = g.op("Gather", [y, g.ints([0])], { axis: 1 }); // [N, 1]
  const over = g.op("Greater", [first, g.scalar(0.3)], {}, { dtype: "bool" }); // [N, 1]
  const big = g.op("Cast", [over], { to: 7 }, { dtype: "int64" }); // [N, 1]
  g.output(g.op("ReduceSum", [big], { keepdims: 0 }), "n", []);
  return g.toModel();
}

Deno.test("the library is onnxruntime-node's own, version-checked, with every used API member present", () => {
  const lib = openOrtLibrary();
  assert.equal(lib.version, ORT_VERSION);
  assert.equal(lib.path, libraryPath());
  assert.match(lib.path, /onnxruntime-node\/bin\/napi-v6\/linux\/x64\/libonnxruntime\.so\.1$/);
  const table = new Deno.UnsafePointerView(lib.api);
  const pointers = Object.values(ORT_API_INDEX).map((i) => Deno.UnsafePointer.value(table.getPointer(8 * i)));
  assert.ok(pointers.every((p) => p !== 0n), "no null member");
  assert.equal(new Set(pointers).size, pointers.length, "distinct functions");
});

Deno.test("a small graph gives the binding's results, reading a subarray view in place", async () => {
  const bytes = smallModel();
  const backing = randoms(40, 3);
  const x = backing.subarray(8, 32); // [6, 4], not at the start of its buffer
  const session = OrtSession.create(bytes, { intraOpThreads: 1 });
  const binding = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
  try {
    assert.deepEqual(session.inputNames, ["x"]);
    assert.deepEqual(session.outputNames, ["y", "n"]);
    const [xt, yt, nt] = [
      new OrtTensor("float32", x, [6, 4]),
      new OrtTensor("float32", new Float32Array(18), [6, 3]),
      new OrtTensor("int64", new BigInt64Array(1), []),
    ];
    session.run({ x: xt }, { y: yt, n: nt });
    const expected = await binding.run({ x: new ort.Tensor("float32", x, [6, 4]) });
    assert.deepEqual(Array.from(yt.data), Array.from(expected.y.data as Float32Array));
    assert.equal(nt.data[0], (expected.n.data as BigInt64Array)[0]);
    assert.equal(xt.ortDataAddress(), xt.jsDataAddress(), "the input is the view's memory");
    [xt, yt, nt].forEach((t) => t.release());
  } finally {
    session.release();
    await binding.release();
  }
});

Deno.test("outputs land in the pre-allocated arrays: same objects, same memory, no new OrtValue", () => {
  const session = OrtSession.create(smallModel());
  try {
    const y = new Float32Array(6).fill(-1);
    const n = new BigInt64Array([99n]);
    const yt = new OrtTensor("float32", y, [2, 3]);
    const nt = new OrtTensor("int64", n, []);
    const [yValue, nValue] = [yt.value, nt.value];
    session.run({ x: new OrtTensor("float32", randoms(8, 4), [2, 4]) }, { y: yt, n: nt });
    assert.equal(yt.data, y);
    assert.ok(y.every((v) => v > 0 && v < 1), "softmax written into the given array");
    assert.ok(n[0] >= 0n && n[0] <= 2n, "count written into the given array");
    assert.equal(yt.ortDataAddress(), yt.jsDataAddress(), "ORT's output buffer is the JS array");
    assert.ok(Deno.UnsafePointer.equals(yt.value, yValue) && Deno.UnsafePointer.equals(nt.value, nValue));
    // A small array (V8 may keep those inside its heap) is moved to a fixed store before use.
    const small = new Float32Array(4);
    const st = new OrtTensor("float32", small, [4]);
    assert.equal(st.ortDataAddress(), st.jsDataAddress());
  } finally {
    session.release();
  }
});

Deno.test("errors carry onnxruntime's message and code", () => {
  const session = OrtSession.create(smallModel());
  try {
    const y = new OrtTensor("float32", new Float32Array(6), [2, 3]);
    assert.throws(
      () => session.run({ x: new OrtTensor("float32", new Float32Array(6), [2, 3]) }, { y }),
      (e: unknown) =>
        e instanceof OrtError && e.code === "INVALID_ARGUMENT" &&
        /Got invalid dimensions for input: x/.test(e.message) && e.message.startsWith("onnxruntime Run"),
    );
    const wrongOut = new OrtTensor("float32", new Float32Array(3), [1, 3]);
    assert.throws(
      () => session.run({ x: new OrtTensor("float32", new Float32Array(8), [2, 4]) }, { y: wrongOut }),
      /pre-allocated/,
    );
    assert.throws(() => session.run({ nope: y }, { y }), /nope/);
  } finally {
    session.release();
  }
  assert.throws(
    () => OrtSession.create(new Uint8Array([1, 2, 3, 4])),
    (e: unknown) =>
      e instanceof OrtError && /CreateSessionFromArray/.test(e.message) && e.ortMessage.length > 0,
  );
  assert.throws(
    () => new OrtTensor("float32", new Float32Array(5), [2, 3]),
    /5 elements given, the shape holds 6/,
  );
  assert.throws(() => new OrtTensor("int64", new Float32Array(1) as never, [1]), /pass a BigInt64Array/);
});

Deno.test("session options: external weights folder, profiling, optimization level, threads", async () => {
  const dir = await Deno.makeTempDir();
  const w = randoms(12, 5);
  await Deno.writeFile(join(dir, "w.bin"), new Uint8Array(w.buffer));
  const g = new GraphBuilder("ext");
  const x = g.input("x", "float32", [1, 4]);
  g.output(
    g.op("MatMul", [x, g.external("w", "float32", [4, 3], { location: "w.bin", offset: 0, length: 48 })]),
    "y",
  );
  const bytes = g.toModel();
  // Relative locations resolve against the working directory unless the folder is configured.
  assert.throws(() => OrtSession.create(bytes), OrtError);
  const session = OrtSession.create(bytes, {
    config: { "session.model_external_initializers_file_folder_path": dir },
    graphOptimization: "disabled",
    intraOpThreads: 1,
    interOpThreads: 1,
    profileFilePrefix: join(dir, "profile"),
  });
  const xs = Float32Array.from([1, 2, 3, 4]);
  const y = new Float32Array(3);
  session.run({ x: new OrtTensor("float32", xs, [1, 4]) }, { y: new OrtTensor("float32", y, [1, 3]) });
  for (let j = 0; j < 3; j++) {
    const expected = xs.reduce((s, v, i) => s + v * w[i * 3 + j], 0);
    assert.ok(Math.abs(y[j] - expected) < 1e-5, `y[${j}]`);
  }
  const profile = session.endProfiling();
  assert.ok(profile && profile.startsWith(join(dir, "profile")), `profile file ${profile}`);
  assert.ok(Array.isArray(JSON.parse(await Deno.readTextFile(profile))), "a JSON trace");
  session.release();
  session.release(); // twice is fine
  assert.throws(() => session.run({}, {}), /after release/);
});

Deno.test("an execution provider is appended by name; one that cannot start fails with ORT's message", () => {
  for (const provider of ["webgpu", "cuda"] as const) {
    try {
      OrtSession.create(smallModel(), { providers: [provider] }).release(); // started: a GPU is here
    } catch (e) {
      assert.ok(e instanceof OrtError, `${provider}: ${e}`);
      assert.ok(e.ortMessage.length > 0);
    }
  }
});

/** One GroupQueryAttention layer: q [1, 1, H·D], k/v [1, 1, Hkv·D], past/present [1, Hkv, M, D]. */
function gqaModel(H: number, Hkv: number, D: number): Uint8Array {
  const g = new GraphBuilder("gqa");
  const o = bindOps(g);
  const [y, pk, pv] = o.GroupQueryAttention({
    query: g.input("q", "float32", [1, "S", H * D]),
    key: g.input("k", "float32", [1, "S", Hkv * D]),
    value: g.input("v", "float32", [1, "S", Hkv * D]),
    pastKey: g.input("past_k", "float32", [1, Hkv, "M", D]),
    pastValue: g.input("past_v", "float32", [1, Hkv, "M", D]),
    seqlensK: g.input("seqlens_k", "int32", [1]),
    totalSequenceLength: g.input("total", "int32", []),
  }, { numHeads: H, kvNumHeads: Hkv });
  g.output(y, "y");
  g.output(pk, "present_k");
  g.output(pv, "present_v");
  return g.toModel();
}

Deno.test("a GQA decode step with past == present writes the new position into the cache in place", async () => {
  const [H, Hkv, D, M, pos] = [4, 2, 8, 16, 5];
  const bytes = gqaModel(H, Hkv, D);
  const session = OrtSession.create(bytes, { intraOpThreads: 1 });
  const binding = await ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 });
  try {
    const [q, k, v] = [randoms(H * D, 6), randoms(Hkv * D, 7), randoms(Hkv * D, 8)];
    // Positions < pos hold a past; later ones a sentinel the step must not touch.
    const fill = (seed: number) => {
      const buf = new Float32Array(Hkv * M * D).fill(7);
      const past = randoms(Hkv * M * D, seed);
      for (let h = 0; h < Hkv; h++) buf.set(past.subarray(h * M * D, h * M * D + pos * D), h * M * D);
      return buf;
    };
    const [keys, values] = [fill(9), fill(10)];
    const [keysCopy, valuesCopy] = [keys.slice(), values.slice()];
    const cacheK = new OrtTensor("float32", keys, [1, Hkv, M, D]);
    const cacheV = new OrtTensor("float32", values, [1, Hkv, M, D]);
    const y = new OrtTensor("float32", new Float32Array(H * D), [1, 1, H * D]);
    const small = {
      q: new OrtTensor("float32", q, [1, 1, H * D]),
      k: new OrtTensor("float32", k, [1, 1, Hkv * D]),
      v: new OrtTensor("float32", v, [1, 1, Hkv * D]),
      seqlens_k: new OrtTensor("int32", Int32Array.from([pos]), [1]),
      total: new OrtTensor("int32", Int32Array.from([pos + 1]), []),
    };
    session.run({ ...small, past_k: cacheK, past_v: cacheV }, { y, present_k: cacheK, present_v: cacheV });

    assert.equal(cacheK.data, keys, "the present is the same array object");
    assert.equal(cacheK.ortDataAddress(), cacheK.jsDataAddress(), "and the same memory, as ORT sees it");
    for (let h = 0; h < Hkv; h++) {
      const at = (p: number) => h * M * D + p * D;
      assert.deepEqual(keys.subarray(at(pos), at(pos + 1)), k.subarray(h * D, (h + 1) * D), `key head ${h}`);
      assert.deepEqual(
        values.subarray(at(pos), at(pos + 1)),
        v.subarray(h * D, (h + 1) * D),
        `value head ${h}`,
      );
      assert.deepEqual(keys.subarray(at(0), at(pos)), keysCopy.subarray(at(0), at(pos)), "the past is kept");
      assert.ok(keys.subarray(at(pos + 1), at(M)).every((x) => x === 7), "later positions untouched");
    }
    // The binding, on its own copy of the cache, computes the same attention output.
    const feeds = Object.fromEntries(
      Object.entries(small).map((
        [name, t],
      ) => [name, new ort.Tensor(t.type, t.data as Float32Array, t.dims)]),
    );
    const [bk, bv] = [
      new ort.Tensor("float32", keysCopy, [1, Hkv, M, D]),
      new ort.Tensor("float32", valuesCopy, [1, Hkv, M, D]),
    ];
    const expected = await binding.run(
      { ...feeds, past_k: bk, past_v: bv },
      { y: null, present_k: bk, present_v: bv } as unknown as ort.InferenceSession.FetchesType,
    );
    assert.deepEqual(Array.from(y.data), Array.from(expected.y.data as Float32Array));
    assert.deepEqual(keys, keysCopy, "both caches hold the same keys after the step");
  } finally {
    session.release();
    await binding.release();
  }
});

Deno.test("zero-length tensors work: a first prompt with an empty past [1, Hkv, 0, D]", async () => {
  const [H, Hkv, D, S] = [4, 2, 8, 3];
  const bytes = gqaModel(H, Hkv, D);
  const session = OrtSession.create(bytes);
  const binding = await ort.InferenceSession.create(bytes);
  try {
    const [q, k, v] = [randoms(S * H * D, 11), randoms(S * Hkv * D, 12), randoms(S * Hkv * D, 13)];
    const empty = new OrtTensor("float32", new Float32Array(0), [1, Hkv, 0, D]);
    const outs = {
      y: new OrtTensor("float32", new Float32Array(S * H * D), [1, S, H * D]),
      present_k: new OrtTensor("float32", new Float32Array(Hkv * S * D), [1, Hkv, S, D]),
      present_v: new OrtTensor("float32", new Float32Array(Hkv * S * D), [1, Hkv, S, D]),
    };
    const inputs = {
      q: new OrtTensor("float32", q, [1, S, H * D]),
      k: new OrtTensor("float32", k, [1, S, Hkv * D]),
      v: new OrtTensor("float32", v, [1, S, Hkv * D]),
      past_k: empty,
      past_v: empty,
      seqlens_k: new OrtTensor("int32", Int32Array.from([S - 1]), [1]),
      total: new OrtTensor("int32", Int32Array.from([S]), []),
    };
    session.run(inputs, outs);
    const expected = await binding.run(
      Object.fromEntries(
        Object.entries(inputs).map(([n, t]) => [n, new ort.Tensor(t.type, t.data as Float32Array, t.dims)]),
      ),
    );
    for (const name of ["y", "present_k", "present_v"] as const) {
      assert.deepEqual(Array.from(outs[name].data), Array.from(expected[name].data as Float32Array), name);
    }
  } finally {
    session.release();
    await binding.release();
  }
});

Deno.test("tensors outlive the CPU memory info they were made with; a new one is made on demand", () => {
  const a = new OrtTensor("float32", new Float32Array([1, 2]), [2]);
  releaseCpuMemoryInfo();
  const b = new OrtTensor("float32", new Float32Array([3, 4]), [2]);
  assert.equal(a.ortDataAddress(), a.jsDataAddress());
  assert.equal(b.ortDataAddress(), b.jsDataAddress());
  a.release();
  a.release();
  assert.ok(a.released && !b.released);
  assert.throws(() => a.value, /after release/);
});

Deno.test("the engine's session runs through FFI on linux-x64 and writes outputs into the given arrays", async () => {
  if (Deno.build.os !== "linux" || Deno.build.arch !== "x86_64" || Deno.env.get("DENO_RL_ORT_FFI") === "0") {
    return;
  }
  const session = await openEngineSession(smallModel(), Deno.cwd(), { threads: 1 });
  try {
    assert.equal(session.backend, "ffi");
    const y = new Float32Array(3);
    const n = new BigInt64Array(1);
    const x = session.bind({ type: "float32", data: randoms(4, 14), dims: [1, 4] });
    await session.run({ x }, {
      y: { type: "float32", data: y, dims: [1, 3] },
      n: { type: "int64", data: n, dims: [] },
    });
    assert.ok(Math.abs(y.reduce((s, v) => s + v, 0) - 1) < 1e-6, "a softmax row in y");
    x.release();
  } finally {
    await session.close();
  }
});
