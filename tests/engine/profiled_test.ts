/**
 * lib/engine/profiled.ts on the CPU: a session opened inside `profiled` writes its profile, which comes
 * back as one trace per session with a `model_run` per run and the graph's nodes in each; the profile
 * knob is put back as it was, also when the function throws.
 */

import assert from "node:assert/strict";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import { openEngineSession } from "../../lib/engine/session.ts";
import { profiled } from "../../lib/engine/profiled.ts";
import { profileRuns, summarizeRun } from "../../lib/ort/profile.ts";

/** y = relu(x @ w + 1): MatMul, Add, Relu. */
function graph(): Uint8Array {
  const g = new GraphBuilder("profiled");
  const x = g.input("x", "float32", ["N", 4]);
  const w = g.initializer("w", Float32Array.from({ length: 12 }, (_, i) => i / 12 - 0.5), [4, 3]);
  g.output(g.op("Relu", [g.op("Add", [g.op("MatMul", [x, w]), g.scalar(1)])]), "y", ["N", 3]);
  return g.toModel();
}

async function runTwice(): Promise<void> {
  const session = await openEngineSession(graph(), Deno.cwd(), { threads: 1 });
  try {
    for (let i = 0; i < 2; i++) {
      const y = new Float32Array(6);
      await session.run(
        { x: { type: "float32", data: new Float32Array(8).fill(i), dims: [2, 4] } },
        { y: { type: "float32", data: y, dims: [2, 3] } },
      );
    }
  } finally {
    await session.close();
  }
}

Deno.test("profiled() returns the trace of each session the function opened, a run per Run call", async () => {
  const traces = await profiled(runTwice);
  assert.equal(traces.length, 1, "one session, one profile");
  const runs = profileRuns(traces[0]);
  assert.equal(runs.length, 2);
  for (const run of runs) {
    const s = summarizeRun(run);
    assert.deepEqual(run.nodes.map((n) => n.op).sort(), ["Add", "MatMul", "Relu"]);
    assert.equal(s.kernels, 3);
    assert.equal(s.gpuMs, null, "the CPU provider writes no GPU timestamps");
  }
});

Deno.test("profiled() puts the profile knob back as it was, also when the function throws", async () => {
  Deno.env.set("DENO_RL_ORT_PROFILE", "/nonexistent/keep");
  try {
    await assert.rejects(profiled(() => Promise.reject(new Error("boom"))), /boom/);
    assert.equal(Deno.env.get("DENO_RL_ORT_PROFILE"), "/nonexistent/keep");
  } finally {
    Deno.env.delete("DENO_RL_ORT_PROFILE");
  }
  await profiled(() => Promise.resolve());
  assert.equal(Deno.env.get("DENO_RL_ORT_PROFILE"), undefined);
});
