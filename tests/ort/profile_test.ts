/**
 * lib/ort/profile.ts on a small profile made here in onnxruntime's trace form: two runs, node kernels
 * inside each (in the second, an If whose subgraph's nodes run inside its own event), WebGPU dispatch
 * timestamps (one starting just after its run's host end), and the events a profile carries that are
 * neither (session setup, the executor, a host-side "Api" event).
 */

import assert from "node:assert/strict";
import { UserError } from "../../lib/errors.ts";
import {
  gpuEvents,
  nodeEvents,
  ownTimes,
  parseTrace,
  profileRuns,
  summarizeRun,
  type TraceEvent,
} from "../../lib/ort/profile.ts";

/** A node kernel of `op` on `provider`, `dur` µs from `ts`. */
function node(name: string, op: string, ts: number, dur: number, provider = "WebGpuExecutionProvider") {
  const args = { op_name: op, provider, input_type_shape: [{ float: [2, 8] }], output_type_shape: [] };
  return { cat: "Node", pid: 7, tid: 7, ph: "X", name: `${name}_kernel_time`, ts, dur, args };
}

/** A WebGPU dispatch of `node`'s `program`, as the provider names it. */
function dispatch(nodeName: string, op: string, program: string, ts: number, dur: number) {
  return { cat: "Api", pid: -1, tid: -1, ph: "X", name: `${nodeName}&${op}&${program}`, ts, dur, args: {} };
}

function run(ts: number, dur: number) {
  return { cat: "Session", pid: 7, tid: 7, ph: "X", name: "model_run", ts, dur, args: {} };
}

/** Two runs: 3 kernels and 3 dispatches, then an If around 2 kernels and 1 dispatch; out of time order. */
function fixture(): TraceEvent[] {
  return [
    { cat: "Session", name: "session_initialization", ts: 0, dur: 500, args: {} },
    run(1000, 1000),
    run(3000, 500),
    node("layers.0/MatMul", "MatMul", 1100, 300),
    node("layers.0/attn/GroupQueryAttention", "GroupQueryAttention", 1400, 200),
    node("layers.1/MatMul", "MatMul", 1600, 100),
    { cat: "Node", name: "SequentialExecutor::Execute", ts: 1000, dur: 990, args: {} },
    dispatch("layers.0/MatMul", "MatMul", "MatMulNBits", 1150, 40),
    dispatch("layers.0/attn/GroupQueryAttention", "GroupQueryAttention", "FlashAttentionDecodeQKV", 1500, 25),
    dispatch("layers.0/attn/GroupQueryAttention", "GroupQueryAttention", "CopyKVCache", 2005, 5),
    node("If", "If", 3050, 200, "CPUExecutionProvider"),
    node("Gather", "Gather", 3100, 50),
    node("Squeeze", "Squeeze", 3200, 10, "CPUExecutionProvider"),
    dispatch("Gather", "Gather", "Gather", 3120, 8),
    { cat: "Api", pid: 7, tid: 7, name: "cudaLaunchKernel", ts: 3130, dur: 3, args: {} },
  ] as TraceEvent[];
}

Deno.test("profileRuns() gives each model_run its node kernels and the GPU dispatches that start before the next run", () => {
  const runs = profileRuns(fixture());
  assert.deepEqual(runs.map((r) => [r.ts, r.dur]), [[1000, 1000], [3000, 500]]);
  assert.deepEqual(runs[0].nodes.map((n) => n.op), ["MatMul", "GroupQueryAttention", "MatMul"]);
  assert.deepEqual(runs[1].nodes.map((n) => `${n.name} ${n.provider}`), [
    "If CPUExecutionProvider",
    "Gather WebGpuExecutionProvider",
    "Squeeze CPUExecutionProvider",
  ]);
  assert.deepEqual(runs[0].gpu.map((g) => g.program), [
    "MatMulNBits",
    "FlashAttentionDecodeQKV",
    "CopyKVCache",
  ]);
  assert.deepEqual(runs[1].gpu.map((g) => g.node), ["Gather"]);
});

Deno.test("summarizeRun() counts kernels and sums host and GPU time, per op by host time", () => {
  const [first, second] = profileRuns(fixture()).map((r) => summarizeRun(r));
  assert.deepEqual(first, {
    kernels: 3,
    gpuDispatches: 3,
    runMs: 1,
    hostMs: 0.6,
    gpuMs: 0.07,
    ops: [
      { op: "MatMul", kernels: 2, hostMs: 0.4, gpuMs: 0.04 },
      { op: "GroupQueryAttention", kernels: 1, hostMs: 0.2, gpuMs: 0.03 },
    ],
  });
  assert.equal(second.kernels, 3);
  assert.equal(second.hostMs, 0.2, "the If's subgraph counts once");
  assert.deepEqual(second.ops.map((o) => [o.op, o.hostMs]), [["If", 0.14], ["Gather", 0.05], [
    "Squeeze",
    0.01,
  ]]);
  assert.equal(summarizeRun(profileRuns(fixture())[0], 1).ops.length, 1, "top 1 op");
});

Deno.test("summarizeRun() reports GPU time as null where the profile has no GPU timestamps", () => {
  const withoutGpu = fixture().filter((e) => !(e.cat === "Api" && e.pid === -1));
  const s = summarizeRun(profileRuns(withoutGpu)[0]);
  assert.equal(s.kernels, 3);
  assert.equal(s.gpuMs, null);
  assert.equal(s.gpuDispatches, null);
  assert.ok(s.ops.every((o) => o.gpuMs === null));
});

Deno.test("ownTimes() takes nested nodes' time out of the node they run inside, at any depth", () => {
  const at = (ts: number, dur: number) => ({ ...nodeEvents([node("n", "X", ts, dur) as TraceEvent])[0] });
  // An outer If [0, 100) holding an inner If [10, 60) holding [20, 30) and [40, 50); then [60, 70); then a
  // sibling after the outer one, [100, 105), and a node of zero time at its end.
  const nodes = [at(0, 100), at(10, 50), at(20, 10), at(40, 10), at(60, 10), at(100, 5), at(105, 0)];
  assert.deepEqual(ownTimes(nodes), [40, 30, 10, 10, 10, 5, 0]);
  assert.deepEqual(ownTimes([...nodes].reverse()), [0, 5, 10, 10, 10, 30, 40], "any event order");
});

Deno.test("nodeEvents() and gpuEvents() read names, ops, providers and shapes; host-side Api events are not GPU time", () => {
  const nodes = nodeEvents(fixture());
  assert.equal(nodes.length, 6, "the executor's Node event is not a kernel");
  assert.deepEqual(nodes[1], {
    name: "layers.0/attn/GroupQueryAttention",
    op: "GroupQueryAttention",
    provider: "WebGpuExecutionProvider",
    ts: 1400,
    dur: 200,
    inputs: [{ float: [2, 8] }],
    outputs: [],
  });
  const gpu = gpuEvents(fixture());
  assert.equal(gpu.length, 4);
  assert.deepEqual(gpu[1], {
    node: "layers.0/attn/GroupQueryAttention",
    op: "GroupQueryAttention",
    program: "FlashAttentionDecodeQKV",
    ts: 1500,
    dur: 25,
  });
});

Deno.test("parseTrace() reads a profile's text and refuses what is not a trace with one line", () => {
  assert.equal(parseTrace(JSON.stringify(fixture())).length, fixture().length);
  assert.throws(
    () => parseTrace("[{", "p.json"),
    (e) => e instanceof UserError && /^onnxruntime profile p\.json: it is not JSON .*Fix: /.test(e.message),
  );
  assert.throws(
    () => parseTrace(JSON.stringify({ traceEvents: [] }), "p.json"),
    (e) =>
      e instanceof UserError &&
      e.message === "onnxruntime profile p.json: it is not an array of trace events with name, ts and dur. " +
          "Fix: pass the JSON file onnxruntime wrote under the profile prefix",
  );
});
