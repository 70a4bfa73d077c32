/**
 * PPO (`mask.estimator: gae`) through `deno task loop` and the stage commands, in subprocesses on a tiny
 * model: a run killed with SIGKILL mid-step and resumed ends with the same adapter, value head and both
 * optimizers' states as an uninterrupted run (file hashes) and the same rollouts, values included; the
 * stage commands run by hand (rollout with the step's adapter, score, mask, train) give the loop's files,
 * values and value head included; the train stage refuses, before the model loads, a batch without
 * `returns`, naming the column.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { exists, stage } from "../helpers/commands.ts";
import { fileHash, killDuringStep2, loop, stageOn } from "../helpers/loop_runs.ts";

const ROOT = new URL("../..", import.meta.url).pathname;

async function setup(): Promise<{ dir: string; config: string }> {
  const dir = await Deno.makeTempDir({ prefix: "ppo-loop-test-" });
  const config = join(dir, "config.yaml");
  await Deno.writeTextFile(
    config,
    `model:
  path: ${await makeTinyModel()}
data:
  arithmetic: { num_tasks: 24 }
rollout:
  group_size: 4
  tasks_per_step: 2
  max_batch: 8
  generation: { max_new_tokens: 8, max_total_tokens: 512, enable_thinking: false }
score:
  rewards: { format: 0.0 }
  modules: [${join(ROOT, "tests/fixtures/ascii_reward.ts")}]
  module_weights: [1.0]
mask:
  estimator: gae
  gae_unit: token
  gamma: 0.99
train:
  lora: { r: 4, alpha: 8 }
  optimizer: { lr: 0.01 }
  value: { lr: 0.01, clip: 0.2 }
  ppo_epochs: 2
  minibatch_episodes: 3
loop:
  steps: 3
  eval_every: 0
  save_every: 1
eval:
  num_tasks: 4
`,
  );
  return { dir, config };
}

/** The columns that must repeat exactly: tokens, provenance, log-probs and the values pass's values. */
async function trajectory(path: string) {
  const f = await readStageFile(path, "rollouts");
  return ["tokens", "sampled", "logprobs", "turn_idx", "values"].map((c) =>
    Array.from(f.listColumn(c).values)
  );
}

const CHECKPOINT_FILES = [
  "adapter_model.safetensors",
  "optimizer.safetensors",
  "value_head.safetensors",
  "value_optimizer.safetensors",
];

Deno.test("a PPO loop killed mid-step and resumed equals an uninterrupted one: adapter, value head, both optimizers", async () => {
  const { dir, config } = await setup();
  const [a, b] = [join(dir, "a"), join(dir, "b")];
  const whole = await loop(config, a);
  assert.equal(whole.code, 0, whole.stderr);

  await killDuringStep2(config, b, "batch.arrow.manifest.json");
  const resumed = await loop(config, b, ["--resume"]);
  assert.equal(resumed.code, 0, resumed.stderr);

  for (const step of ["step-0001", "step-0002", "step-0003"]) {
    assert.deepEqual(
      await trajectory(join(b, step, "rollouts.arrow")),
      await trajectory(join(a, step, "rollouts.arrow")),
      step,
    );
  }
  for (const f of CHECKPOINT_FILES) {
    const at = (run: string, step = "step-0003") => fileHash(join(run, "adapters", step, f));
    assert.equal(await at(b), await at(a), f);
    assert.notEqual(await at(a, "step-0002"), await at(a), `${f} moved in step 3`);
  }
  const metrics = await readStageFile(join(a, "adapters", "step-0003", "metrics.arrow"), "metrics");
  assert.equal(metrics.rows, 2 * Math.ceil(8 / 3), "ppo_epochs x minibatches optimizer steps");
  for (const c of ["value_loss", "approx_kl", "explained_var", "value_mean"]) assert.ok(metrics.has(c), c);
});

Deno.test("PPO stage commands by hand give the loop's files, values and value head included", async () => {
  const { dir, config } = await setup();
  const run = join(dir, "run");
  assert.equal((await loop(config, run, ["--loop.steps=2"])).code, 0);
  const hand = join(dir, "hand");
  await Deno.mkdir(hand);
  const at = (f: string) => join(hand, f);
  const ok = stageOn(config);
  // Step 2 by hand, from the loop's step-1 checkpoint (its LoRA adapter and value head).
  const adapter = `--adapter=${join(run, "adapters", "step-0001")}`;
  await ok("rollout", ["--step", "2", "--out", at("rollouts.arrow"), adapter]);
  await ok("score", ["--in", at("rollouts.arrow"), "--out", at("scored.arrow")]);
  await ok("mask", ["--in", at("scored.arrow"), "--out", at("batch.arrow")]);
  await ok("train", ["--in", at("batch.arrow"), "--out", at("adapter"), adapter]);
  const step = join(run, "step-0002");
  const loopValues = await trajectory(join(step, "rollouts.arrow"));
  assert.deepEqual(await trajectory(at("rollouts.arrow")), loopValues);
  assert.ok(loopValues[4].some((v) => v !== 0), "values were written");
  for (const column of ["advantages", "returns"]) {
    const [x, y] = [
      await readStageFile(at("batch.arrow"), "batch"),
      await readStageFile(join(step, "batch.arrow"), "batch"),
    ];
    assert.deepEqual(
      Array.from(x.listColumn(column).values),
      Array.from(y.listColumn(column).values),
      column,
    );
  }
  for (const f of CHECKPOINT_FILES) {
    assert.equal(
      await fileHash(at(`adapter/${f}`)),
      await fileHash(join(run, "adapters", "step-0002", f)),
      f,
    );
  }

  // A batch masked by grpo has no returns: the PPO train stage refuses it before the model loads.
  await ok("mask", ["--in", at("scored.arrow"), "--out", at("grpo.arrow"), "--mask.estimator=grpo"]);
  const refused = await stage("train", [
    "--config",
    config,
    "--in",
    at("grpo.arrow"),
    "--out",
    at("refused"),
  ]);
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(refused.stderr, /column "returns".*deno task mask/);
  assert.equal(refused.stderr.trim().split("\n").length, 1, refused.stderr);
  assert.equal(await exists(at("refused")), false);
});
