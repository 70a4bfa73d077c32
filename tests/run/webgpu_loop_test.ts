/**
 * `deno task loop` with `model.ep: webgpu`, as a user runs it: two steps of rollout, score, mask and train
 * on WebGPU in one process (the policy in its Worker with the KV cache on the device, the trainer's session
 * beside it), ending with both steps' files, adapters and metrics. Runs where WebGPU starts, like
 * tests/engine/webgpu_test.ts (CI: lavapipe).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { exists, stage } from "../helpers/commands.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { webgpuTest } from "../helpers/webgpu.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

webgpuTest("a 2-step deno task loop with model.ep webgpu runs end to end", async () => {
  const dir = await Deno.makeTempDir({ prefix: "webgpu-loop-" });
  const config = join(dir, "config.yaml");
  await Deno.writeTextFile(
    config,
    `model:
  path: ${await makeTinyModel()}
  ep: webgpu
data:
  arithmetic: { num_tasks: 8 }
rollout:
  group_size: 2
  tasks_per_step: 1
  max_batch: 2
  generation: { max_new_tokens: 4, max_total_tokens: 512, enable_thinking: false }
score:
  rewards: { format: 0.0 }
  modules: [${join(ROOT, "tests/fixtures/ascii_reward.ts")}]
  module_weights: [1.0]
train:
  lora: { r: 2, alpha: 4 }
loop:
  steps: 2
  eval_every: 0
  save_every: 1
eval:
  num_tasks: 2
`,
  );
  const run = join(dir, "run");
  const r = await stage("loop", ["--config", config, `--loop.run_dir=${run}`], { timeoutMs: 600_000 });
  assert.equal(r.code, 0, r.stderr);
  for (const step of ["step-0001", "step-0002"]) {
    assert.ok(await exists(join(run, step)), `${step} written`);
    assert.ok(await exists(join(run, "adapters", step, "adapter_model.safetensors")), `${step} adapter`);
  }
  const rollouts = await readStageFile(join(run, "step-0002", "rollouts.arrow"), "rollouts");
  assert.equal(rollouts.rows, 2);
  const lps = Array.from(rollouts.listColumn("logprobs").values as Float32Array);
  assert.ok(lps.some((v) => v < 0) && lps.every(Number.isFinite), "sampled tokens carry log-probs");
  await Deno.remove(dir, { recursive: true });
});
