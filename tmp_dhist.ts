import { LocalPolicy } from "./lib/engine/local_policy.ts";
import { profiled } from "./lib/engine/profiled.ts";
import type { ComputeDtype } from "./lib/model/graph/forms.ts";
import type { LoraSpec } from "./lib/model/lora.ts";
import { openModelDir } from "./lib/model/model_dir.ts";
import { busiestRuns } from "./lib/ort/profile.ts";
import { randomAdapter } from "./tests/helpers/adapters.ts";
import { makeTinyModel } from "./tests/helpers/tiny_model.ts";
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
const ep = (Deno.args[0] ?? "webgpu") as "cpu" | "webgpu";
const compute = (Deno.args[1] ?? "float32") as ComputeDtype;
const layers = Number(Deno.args[2] ?? 28);
const merge = Deno.args[4] === undefined ? undefined : Deno.args[4] === "true";
const dir = await makeTinyModel({ layers, vocab: 512, tokenizer: false, seed: 11 });
const adapter = randomAdapter((await openModelDir(dir)).config, SPEC, 5);
const traces = await profiled(async () => {
  const policy = await LocalPolicy.load(dir, { adapter, ep, compute, mergeAdapter: merge });
  try {
    await policy.generate([[1, 2, 3, 4, 5, 6]], { maxNewTokens: 4, temperature: 1 });
  } finally {
    await policy.close();
  }
});
const run = busiestRuns(traces).at(-1)!;
const byOp = new Map<string, [number, number]>();
for (const n of run.nodes) { const e = byOp.get(n.op) ?? [0, 0]; e[0]++; byOp.set(n.op, e); }
const gpuNodes = new Set(run.gpu.map((g) => g.node));
for (const n of run.nodes) if (gpuNodes.has(n.name)) byOp.get(n.op)![1]++;
console.log(`nodes ${run.nodes.length} gpu ${run.gpu.length}`);
for (const [op, [n, g]] of [...byOp].sort((a, b) => b[1][0] - a[1][0])) console.log(op.padEnd(36), n, g);
if (Deno.args[3]) await Deno.writeTextFile(Deno.args[3], JSON.stringify(run.nodes.map((n) => [n.name, n.op, n.inputs, n.outputs])));
if (Deno.args[3]) await Deno.writeTextFile(Deno.args[3] + ".gpu.json", JSON.stringify(run.gpu));
const byOpDur = new Map<string, number>();
for (const n of run.nodes) byOpDur.set(n.op, (byOpDur.get(n.op) ?? 0) + (n as unknown as { dur: number }).dur);
console.log("run dur us", run.dur, "sum node dur", [...byOpDur.values()].reduce((a, b) => a + b, 0));
for (const [op, d] of [...byOpDur].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(op.padEnd(30), d);
const tail = run.nodes.filter((n) => !n.name.startsWith("layers."));
for (const n of tail) console.log("N", n.op, n.name, (n as unknown as { dur: number }).dur);
