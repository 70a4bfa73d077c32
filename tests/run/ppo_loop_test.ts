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
import { exists, stage } from "../helpers/commands.ts";
import { fileHash, loop, stageOn, tinyLoopConfig, wholeAndResumed } from "../helpers/loop_runs.ts";

/** PPO: gae per token, a clipped value loss, 2 epochs of minibatches of 3 episodes. */
function setup(): Promise<{ dir: string; config: string }> {
  return tinyLoopConfig("ppo-loop-test-", {
    mask: "  estimator: gae\n  gae_unit: token\n  gamma: 0.99\n",
    train: "  value: { lr: 0.01, clip: 0.2 }\n  ppo_epochs: 2\n  minibatch_episodes: 3\n",
  });
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
  const [a, b] = await wholeAndResumed(config, dir, "batch.arrow.manifest.json");

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
