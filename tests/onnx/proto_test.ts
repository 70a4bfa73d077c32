/**
 * The wire writer, the ModelProto encoder and the graph builder, checked against onnxruntime.
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { ProtoWriter } from "../../lib/onnx/wire.ts";
import { encodeModel } from "../../lib/onnx/proto.ts";
import { attr, GraphBuilder, irVersionFor } from "../../lib/onnx/builder.ts";

/** Runs a model once on CPU and returns its outputs. */
async function run(
  bytes: Uint8Array,
  feeds: Record<string, ort.Tensor>,
  options: ort.InferenceSession.SessionOptions = {},
): Promise<ort.InferenceSession.ReturnType> {
  const session = await ort.InferenceSession.create(bytes, options);
  try {
    return await session.run(feeds);
  } finally {
    await session.release();
  }
}

function close(actual: ArrayLike<number>, expected: ArrayLike<number>, tol = 1e-6): void {
  assert.deepEqual(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    assert(Math.abs(actual[i] - expected[i]) <= tol, `at ${i}: ${actual[i]} vs ${expected[i]}`);
  }
}

Deno.test("ProtoWriter encodes varints, negative int64, floats and packed fields as protobuf does", () => {
  assert.deepEqual([...new ProtoWriter().varint(1, 150).finish()], [0x08, 0x96, 0x01]);
  assert.deepEqual([...new ProtoWriter().varint(3, -1).finish()], [0x18, ...Array(9).fill(0xff), 0x01]);
  assert.deepEqual([...new ProtoWriter().varint(1, 2n ** 40n).finish()], [
    0x08,
    0x80,
    0x80,
    0x80,
    0x80,
    0x80,
    0x20,
  ]);
  assert.deepEqual([...new ProtoWriter().float(2, 1).finish()], [0x15, 0x00, 0x00, 0x80, 0x3f]);
  assert.deepEqual([...new ProtoWriter().string(2, "hi").finish()], [0x12, 0x02, 0x68, 0x69]);
  assert.deepEqual([...new ProtoWriter().packedVarints(8, [1, 300]).finish()], [
    0x42,
    0x03,
    0x01,
    0xac,
    0x02,
  ]);
  assert.deepEqual(new ProtoWriter().packedVarints(8, []).finish().length, 0);
});

Deno.test("ProtoWriter nests messages and large buffers without losing bytes", () => {
  const big = new Uint8Array(1000).map((_, i) => i % 251);
  const inner = new ProtoWriter().bytes(1, big).varint(2, 7);
  const bytes = new ProtoWriter().message(5, inner).finish();
  assert.deepEqual(bytes.length, 1 + 2 + (1 + 2 + 1000 + 2));
  assert.deepEqual([...bytes.subarray(0, 6)], [0x2a, 0xed, 0x07, 0x0a, 0xe8, 0x07]);
  assert.deepEqual([...bytes.subarray(6, 1006)], [...big]);
});

Deno.test("encodeModel output loads in onnxruntime and computes Add with a symbolic batch dim", async () => {
  const b = new Float32Array([1, 2, 3]);
  const bytes = encodeModel({
    irVersion: 10,
    opsets: [{ domain: "", version: 21 }],
    graph: {
      name: "add",
      nodes: [{ opType: "Add", inputs: ["a", "b"], outputs: ["c"] }],
      initializers: [{ name: "b", dtype: "float32", dims: [3], raw: new Uint8Array(b.buffer) }],
      inputs: [{ name: "a", dtype: "float32", dims: ["B", 3] }],
      outputs: [{ name: "c", dtype: "float32", dims: ["B", 3] }],
    },
  });
  const out = await run(bytes, {
    a: new ort.Tensor("float32", new Float32Array([0, 1, 2, 3, 4, 5]), [2, 3]),
  });
  close(out.c.data as Float32Array, [1, 3, 5, 4, 6, 8]);
  assert.deepEqual(out.c.dims, [2, 3]);
});

Deno.test("irVersionFor maps opsets onnxruntime 1.30 accepts, up to 26", async () => {
  for (const opset of [21, 23, 26]) {
    const g = new GraphBuilder("neg");
    g.output(g.op("Neg", [g.input("x", "float32", [2])]), "y");
    const out = await run(g.toModel({ opsets: { "": opset } }), {
      x: new ort.Tensor("float32", new Float32Array([1, -2]), [2]),
    });
    close(out.y.data as Float32Array, [-1, 2]);
  }
  assert.deepEqual(irVersionFor(21), 10);
  assert.deepEqual(irVersionFor(26), 13);
});

Deno.test("GraphBuilder names values by scope, deduplicates, and shares small constants", () => {
  const g = new GraphBuilder("names");
  const x = g.input("x", "float32", ["B", "T"]);
  const a = g.scope("layers.3", () => g.scope("attn", () => g.op("Neg", [x])));
  const b = g.scope("layers.3", () => g.scope("attn", () => g.op("Neg", [x])));
  assert.deepEqual(a.name, "layers.3/attn/Neg");
  assert.deepEqual(b.name, "layers.3/attn/Neg_1");
  assert.deepEqual(a.dtype, "float32");
  assert.deepEqual(g.scalar(2).name, g.scalar(2).name);
  assert.deepEqual(g.ints([0, 1]).name, "const_int64_0_1");
  assert.throws(() => g.input("x", "float32", [1]), /already in use/);
  assert.throws(() => g.initializer("w", new Float32Array(3), [2, 2]), /needs 16 bytes/);
});

Deno.test("GraphBuilder outputs an input, a constant and one value twice through Identity", async () => {
  const g = new GraphBuilder("outs");
  const x = g.input("x", "float32", [2]);
  const y = g.op("Mul", [x, g.scalar(3)], {}, { name: "times3" });
  g.output(x, "x_again");
  g.output(y);
  g.output(y, "y2");
  g.output(g.vector([7, 8]), "c");
  const out = await run(g.toModel(), { x: new ort.Tensor("float32", new Float32Array([1, 2]), [2]) });
  close(out.x_again.data as Float32Array, [1, 2]);
  close(out.times3.data as Float32Array, [3, 6]);
  close(out.y2.data as Float32Array, [3, 6]);
  close(out.c.data as Float32Array, [7, 8]);
});

Deno.test("GraphBuilder writes only the nodes an output needs, outer-scope reads of a subgraph included", () => {
  const g = new GraphBuilder("live");
  const x = g.input("x", "float32", [2]);
  const flag = g.input("flag", "bool", []);
  g.op("Exp", [g.op("Neg", [x], {}, { name: "unread" })], {}, { name: "dead" }); // reaches no output
  const onlyInBranch = g.op("Sin", [x], {}, { name: "read_by_branch" });
  const then = g.subgraph("then");
  then.output(then.op("Add", [onlyInBranch, x]), "t");
  const other = g.subgraph("else");
  other.output(x, "e");
  const [y] = g.opN("If", [flag], 1, { then_branch: then, else_branch: other }, { shape: [[2]] });
  g.output(y, "y");
  assert.deepEqual(g.nodes.map((n) => n.name), ["unread", "dead", "read_by_branch", "If", "y"]);
  assert.deepEqual(g.toGraph().nodes.map((n) => n.name), ["read_by_branch", "If", "y"]);
});

Deno.test("attributes: ints, negative ints and floats reach onnxruntime", async () => {
  const g = new GraphBuilder("attrs");
  const x = g.input("x", "float32", [2, 3]);
  const t = g.op("Transpose", [x], { perm: [1, 0] });
  const s = g.op("Softmax", [t], { axis: -1 });
  const e = g.op("Elu", [s], { alpha: attr.float(2) });
  g.output(e, "y");
  const out = await run(g.toModel(), {
    x: new ort.Tensor("float32", new Float32Array([0, 0, 0, 0, 0, 0]), [2, 3]),
  });
  assert.deepEqual(out.y.dims, [3, 2]);
  close(out.y.data as Float32Array, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]);
});

/** Writes `bytes` at `offset` into a fresh file `weights.bin` of a temp dir, after junk bytes. */
async function writeWeights(offset: number, bytes: Uint8Array): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "onnx_ext_" });
  const file = new Uint8Array(offset + bytes.length + 5).fill(0xab);
  file.set(bytes, offset);
  await Deno.writeFile(`${dir}/weights.bin`, file);
  return dir;
}

Deno.test("an external float32 initializer is read from a file at a non-zero, unaligned offset", async () => {
  const w = new Float32Array([1, 2, 3, 4, 5, 6]);
  const dir = await writeWeights(13, new Uint8Array(w.buffer));
  const g = new GraphBuilder("ext");
  const x = g.input("x", "float32", ["B", 2]);
  const weight = g.external("w", "float32", [2, 3], { location: "weights.bin", offset: 13, length: 24 });
  g.output(g.op("MatMul", [x, weight]), "y");
  const out = await run(g.toModel(), { x: new ort.Tensor("float32", new Float32Array([1, 1]), [1, 2]) }, {
    extra: { session: { model_external_initializers_file_folder_path: dir } },
  });
  close(out.y.data as Float32Array, [5, 7, 9]);
  await Deno.remove(dir, { recursive: true });
});

/** bf16 bits of a float32 (round to nearest even), as a safetensors checkpoint stores them. */
function toBf16(values: number[]): Uint16Array {
  const f = new Float32Array(values);
  const u = new Uint32Array(f.buffer);
  return Uint16Array.from(u, (bits) => (bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16);
}

Deno.test("a bfloat16 external initializer cast to float32 gives the bf16-rounded values", async () => {
  const values = [1, -2.5, 3.14159, 1e-3, 65504, -0.1];
  const bits = toBf16(values);
  const dir = await writeWeights(8 + 37, new Uint8Array(bits.buffer));
  const g = new GraphBuilder("bf16");
  const w = g.external("w", "bfloat16", [2, 3], { location: "weights.bin", offset: 45, length: 12 });
  const x = g.input("x", "float32", [2, 3]);
  g.output(g.op("Add", [x, g.op("Cast", [w], { to: 1 }, { dtype: "float32" })]), "y");
  const out = await run(g.toModel(), { x: new ort.Tensor("float32", new Float32Array(6), [2, 3]) }, {
    extra: { session: { model_external_initializers_file_folder_path: dir } },
  });
  const expected = Array.from(bits, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]);
  close(out.y.data as Float32Array, expected, 0);
  close(out.y.data as Float32Array, values, 4e-3 * 65504);
  await Deno.remove(dir, { recursive: true });
});
