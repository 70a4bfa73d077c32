/**
 * Initializers from the caller's memory (lib/ort, onnxruntime's AddInitializer), the prepacked-weights
 * container, and the arena / memory-pattern switches: the behaviour lib/model/shared_weights.ts builds
 * on, on a one-Gemm graph whose weight is declared as external data that is never read.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import { OPS } from "../../lib/onnx/ops.ts";
import { OrtSession, type OrtSessionOptions, PrepackedWeights } from "../../lib/ort/session.ts";
import { OrtTensor } from "../../lib/ort/value.ts";
import { mulberry32 } from "../reference/weights.ts";

const [K, N] = [32, 24];

function randoms(n: number, seed: number): Float32Array {
  const rand = mulberry32(seed);
  return Float32Array.from({ length: n }, () => rand() * 2 - 1);
}

/** y = x · wᵀ, with w `[N, K]` an external initializer whose file holds a single byte. */
async function gemmModel(): Promise<{ bytes: Uint8Array; folder: string }> {
  const folder = await Deno.makeTempDir();
  await Deno.writeFile(join(folder, "placeholder.bin"), new Uint8Array(1));
  const g = new GraphBuilder("gemm");
  const x = g.input("x", "float32", ["M", K]);
  const w = g.external("w", "float32", [N, K], { location: "placeholder.bin", offset: 0, length: 4 * N * K });
  g.output(OPS.Gemm.emit(g, x, w, null, { transB: true }), "y");
  return { bytes: g.toModel(), folder };
}

function open(model: { bytes: Uint8Array; folder: string }, w: OrtTensor, extra: OrtSessionOptions = {}) {
  const config = { "session.model_external_initializers_file_folder_path": model.folder, ...extra.config };
  return OrtSession.create(model.bytes, { ...extra, config, initializers: { w }, intraOpThreads: 1 });
}

const x = randoms(2 * K, 1);

function run(session: OrtSession): Float32Array {
  const y = new Float32Array(2 * N);
  session.run({ x: new OrtTensor("float32", x, [2, K]) }, { y: new OrtTensor("float32", y, [2, N]) });
  return y;
}

function expected(w: Float32Array): number[] {
  return Array.from({ length: 2 * N }, (_, i) => {
    const [m, n] = [Math.floor(i / N), i % N];
    return x.subarray(m * K, (m + 1) * K).reduce((s, v, k) => s + v * w[n * K + k], 0);
  });
}

function assertNear(actual: Float32Array, wanted: number[]) {
  actual.forEach((v, i) =>
    assert.ok(Math.abs(v - wanted[i]) < 1e-4, `y[${i}] = ${v}, expected ${wanted[i]}`)
  );
}

Deno.test("an initializer given from JS memory is read in place when prepacking is off", async () => {
  const model = await gemmModel();
  const w = randoms(N * K, 2);
  const session = open(model, new OrtTensor("float32", w, [N, K]), {
    config: { "session.disable_prepacking": "1" },
  });
  try {
    assertNear(run(session), expected(w)); // the placeholder file (one byte) was never read
    w[3] += 1; // the session computes on this memory, not on a copy
    assertNear(run(session), expected(w));
  } finally {
    session.release();
  }
});

Deno.test("with prepacking on, a Gemm keeps a packed copy: later changes to the memory are not seen", async () => {
  const model = await gemmModel();
  const w = randoms(N * K, 3);
  const original = expected(w);
  const container = new PrepackedWeights();
  const tensor = new OrtTensor("float32", w, [N, K]);
  const sessions = [open(model, tensor), open(model, tensor, { prepackedWeights: container })];
  try {
    w.fill(0);
    for (const session of sessions) assertNear(run(session), original);
  } finally {
    sessions.forEach((s) => s.release());
    container.release();
  }
});

Deno.test("sessions sharing a prepacked-weights container, without the arena or memory patterns, agree", async () => {
  const model = await gemmModel();
  const w = randoms(N * K, 4);
  const container = new PrepackedWeights();
  const tensor = new OrtTensor("float32", w, [N, K]);
  const options = { prepackedWeights: container, cpuArena: false, memPattern: false };
  const [a, b] = [open(model, tensor, options), open(model, tensor, options)];
  try {
    const ya = run(a);
    assert.deepEqual(run(b), ya);
    assert.deepEqual(run(a), ya, "a second run (no memory pattern) gives the same values");
    assertNear(ya, expected(w));
  } finally {
    a.release();
    b.release();
    container.release();
    container.release(); // twice is fine
  }
  assert.throws(() => container.pointer, /after release/);
});
