/**
 * The loop driving remote rollouts while training locally: `deno task serve`'s server runs in this
 * process on loopback with the tiny model, and `deno task loop` (a subprocess, as a user runs it) takes
 * two steps with `model.backend: vllm` pointed at it and `train.loss.rollout_is: truncate`. Step 2's
 * episodes are sampled by the server with step 1's adapter hot-loaded (their log-probs are that
 * adapter's, scored locally), and the trainer recomputed the old log-probs (mismatch columns logged).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { startServer } from "../../lib/serve/serve.ts";
import { denoRunArgs } from "../helpers/commands.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const MAX_TOKENS = 512;

async function writeConfig(dir: string, model: string, url: string): Promise<string> {
  const config = join(dir, "config.yaml");
  await Deno.writeTextFile(
    config,
    `model:
  path: ${model}
  backend: vllm
  server: { urls: [${url}], health_timeout_s: 10, request_timeout_s: 60 }
data:
  arithmetic: { num_tasks: 24 }
rollout:
  group_size: 4
  tasks_per_step: 2
  max_batch: 8
  generation: { max_new_tokens: 8, max_total_tokens: ${MAX_TOKENS}, enable_thinking: false, temperature: 1.0 }
score:
  rewards: { format: 0.0 }
  modules: [${join(ROOT, "tests/fixtures/ascii_reward.ts")}]
  module_weights: [1.0]
train:
  lora: { r: 4, alpha: 8 }
  optimizer: { lr: 0.01 }
  loss: { rollout_is: truncate, rollout_is_cap: 2.0 }
loop:
  run_dir: ${join(dir, "run")}
  steps: 2
  eval_every: 0
  save_every: 1
eval:
  num_tasks: 4
`,
  );
  return config;
}

Deno.test("two loop steps with model.backend vllm against deno task serve: adapter hot-loaded, old log-probs recomputed", async () => {
  const model = await makeTinyModel();
  const dir = await Deno.makeTempDir({ prefix: "loop-server-" });
  const served = await LocalPolicy.load(model, { maxSequences: 8 });
  // The server reads adapters only below its adapter root: the run directory is inside it.
  const server = await startServer(served, {
    modelDir: model,
    port: 0,
    adapterRoot: dir,
    maxModelLen: MAX_TOKENS,
  });
  try {
    const config = await writeConfig(dir, model, server.url);
    const out = await new Deno.Command(Deno.execPath(), {
      args: [...denoRunArgs("stages/loop.ts"), "--config", config],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
    const run = join(dir, "run");
    const step = (n: number, file: string) => join(run, `step-000${n}`, file);
    const [first, second] = [
      await readStageFile(step(1, "rollouts.arrow"), "rollouts"),
      await readStageFile(step(2, "rollouts.arrow"), "rollouts"),
    ];
    const trained = await readStageFile(step(1, "metrics.arrow"), "metrics");
    // Step 2 was sampled by the server with step 1's adapter, named as the trainer names it.
    assert.equal(first.metadata.adapter, "base");
    assert.equal(second.metadata.adapter, trained.metadata.adapter);
    assert.deepEqual(new Set(second.column("policy_version")), new Set([trained.metadata.adapter]));
    // ... and its log-probs are that adapter's: the local engine with it scores the same tokens alike.
    const local = await LocalPolicy.load(model, { adapter: join(run, "adapters", "step-0001") });
    try {
      const tokens = (second.column("tokens") as Int32Array[]).map((t) => [...t]);
      const scored = await local.logprobs(tokens, { temperature: 1 });
      let worst = 0;
      tokens.forEach((_, i) => {
        const [sampled, lp] = [second.listAt("sampled", i), second.listAt("logprobs", i)];
        sampled.forEach((s, t) => s && (worst = Math.max(worst, Math.abs(lp[t] - scored[i][t]))));
      });
      assert.ok(worst < 1e-4, `largest log-prob difference ${worst}`);
    } finally {
      await local.close();
    }
    // The trainer recomputed the old log-probs: the mismatch is logged, and tiny (the server is our engine).
    for (const n of [1, 2]) {
      const metrics = await readStageFile(step(n, "metrics.arrow"), "metrics");
      const diff = metrics.column("rollout_logprob_diff") as number[];
      assert.ok(diff.every((d) => d >= 0 && d < 1e-4), `step ${n} mismatch ${diff}`);
      assert.deepEqual(metrics.column("rollout_is_clip_frac"), diff.map(() => 0));
    }
    const runMetrics = await readStageFile(join(run, "metrics.arrow"), "run_metrics");
    assert.equal(runMetrics.rows, 2);
    assert.ok(runMetrics.has("rollout_logprob_diff"));
  } finally {
    await server.close();
    await served.close();
  }
});
