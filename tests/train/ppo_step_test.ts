/**
 * PPO's schedule over one batch (lib/train/ppo_step.ts): `ppo_epochs` × ⌈episodes / minibatch_episodes⌉
 * optimizer steps, each minibatch a shuffled set of episodes that covers the batch once per epoch; both
 * optimizers step each time (the LoRA adapter's and the value head's); a target approx-KL stops the
 * remaining epochs before the step that would exceed 1.5 × it; the same seed and step repeat the same
 * steps bit for bit.
 */

import assert from "node:assert/strict";
import { openModelDir } from "../../lib/model/model_dir.ts";
import type { LoraSpec } from "../../lib/model/lora.ts";
import { aggregationWeights, type TrainEpisode } from "../../lib/train/batch.ts";
import { initOptimizerState } from "../../lib/train/optimizer.ts";
import { minibatches } from "../../lib/train/ppo_step.ts";
import { trainerLogprobs } from "../../lib/train/rollout_is.ts";
import { type StepSettings, trainOnBatch } from "../../lib/train/step.ts";
import { Trainer } from "../../lib/train/trainer.ts";
import {
  freshValueState,
  readValueState,
  type ValueState,
  writeValueState,
} from "../../lib/train/value_checkpoint.ts";
import { UserError } from "../../lib/errors.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { mulberry32 } from "../reference/weights.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "v"] };

function settings(targetKl: number | null): StepSettings {
  return {
    aggregation: "token_mean",
    maxResponseTokens: 32,
    microBatchTokens: 64,
    numIterations: 1,
    optimizer: { name: "adamw", lr: 0.05, max_grad_norm: 1, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 },
    schedule: { name: "constant", warmup_steps: 0, min_lr_ratio: 0 },
    totalSteps: 100,
    scalars: { temperature: 1, epsLow: 0.2, epsHigh: 0.2, beta: 0, vfCoef: 0.5, valueClip: 0 },
    seed: 3,
    ppo: { epochs: 3, minibatchEpisodes: 2, targetKl, valueLr: 0.01 },
  };
}

Deno.test("minibatches cover every episode once per epoch, in a seeded order", () => {
  const a = minibatches(7, 3, 11);
  assert.deepEqual(a.map((m) => m.length), [3, 3, 1]);
  assert.deepEqual(a.flat().sort(), [0, 1, 2, 3, 4, 5, 6]);
  assert.deepEqual(minibatches(7, 3, 11), a);
  assert.notDeepEqual(minibatches(7, 3, 12), a);
});

Deno.test("PPO on a batch: epochs × minibatches steps of both optimizers; a target KL stops early; repeatable", async () => {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 });
  const model = await openModelDir(dir);
  const trainer = await Trainer.create(model, {
    lora: SPEC,
    objective: "clipped",
    withReference: false,
    valueLoss: "squared",
  });
  try {
    const rand = mulberry32(9);
    const start = randomAdapter(model.config, SPEC, 4, 0.1);
    const value0 = freshValueState(model.config.hidden_size, 1, "adamw");
    const base: TrainEpisode[] = [10, 12, 9, 14, 11].map((n, i) => {
      const tokens = Array.from({ length: n }, () => Math.floor(rand() * VOCAB));
      const zeros = tokens.map(() => 0);
      return {
        tokens,
        lossMask: tokens.map((_, t) => (t >= 3 ? 1 : 0)),
        inputs: {
          old_logprobs: zeros,
          advantages: tokens.map(() => (i % 2 ? -1 : 1)),
          returns: tokens.map((_, t) => (t >= 3 ? (i % 2 ? 0 : 1) : 0)),
        },
      };
    });
    // On-policy old log-probs (the trainer's own), so the first minibatch's approx-KL is ~0.
    const weights = aggregationWeights(base, "token_mean", 32);
    const old = await trainerLogprobs(
      trainer,
      base,
      weights,
      start.weights,
      settings(null).scalars,
      64,
      value0.weights,
    );
    const eps = base.map((e, i) => ({
      ...e,
      inputs: { ...e.inputs, old_logprobs: old[i].map((v) => (Number.isNaN(v) ? 0 : v)) },
    }));

    const run = async (targetKl: number | null) => {
      const params = new Map([...start.weights].map(([k, v]) => [k, v.slice()]));
      const value: ValueState = {
        weights: new Map([...value0.weights].map(([k, v]) => [k, v.slice()])),
        optimizer: initOptimizerState("adamw", value0.weights),
      };
      const state = initOptimizerState("adamw", params);
      const rows = await trainOnBatch(trainer, eps, params, state, settings(targetKl), value);
      return { rows, params, value, state };
    };
    const full = await run(null);
    assert.equal(full.rows.length, 3 * 3, "3 epochs of ⌈5 / 2⌉ minibatches");
    assert.deepEqual(full.rows.map((r) => r.ppo!.epoch), [1, 1, 1, 2, 2, 2, 3, 3, 3]);
    assert.equal(full.state.step, 9);
    assert.equal(full.value.optimizer.step, 9);
    assert.ok(full.rows[0].ppo!.approx_kl < 1e-6, `on-policy first step: ${full.rows[0].ppo!.approx_kl}`);
    assert.ok(full.rows.at(-1)!.ppo!.approx_kl > 1e-4, "the policy moved");
    for (const [k, v] of full.value.weights) assert.notDeepEqual(v, value0.weights.get(k), `${k} moved`);
    const again = await run(null);
    assert.deepEqual(again.rows.map((r) => r.loss), full.rows.map((r) => r.loss));
    for (const [k, v] of again.value.weights) assert.deepEqual(v, full.value.weights.get(k));

    const kls = full.rows.map((r) => r.ppo!.approx_kl);
    const target = kls[4] / 1.5 * 0.999; // the fifth step's KL just exceeds 1.5 × target
    const stopped = await run(target);
    const expected = kls.findIndex((kl) => kl > 1.5 * target);
    assert.ok(expected >= 1 && expected < 9, `stops mid-batch: ${expected}`);
    assert.equal(stopped.rows.length, expected, `stops before step ${expected + 1}`);
    assert.equal(stopped.state.step, expected);
    assert.equal(stopped.value.optimizer.step, expected);
  } finally {
    await trainer.close();
  }
});

Deno.test("the value head and its optimizer round-trip through their files; a head of another size is refused", async () => {
  const dir = await Deno.makeTempDir({ prefix: "value-head-" });
  const saved = freshValueState(64, 5, "adamw");
  saved.optimizer.step = 7;
  saved.optimizer.m.forEach((m, k) => m.fill(0.25).set([k.length]));
  await writeValueState(dir, saved, 64);
  const back = await readValueState(dir, 64, 99, "adamw");
  assert.equal(back.optimizer.step, 7);
  for (const [k, v] of saved.weights) assert.deepEqual(back.weights.get(k), v);
  for (const [k, m] of saved.optimizer.m) assert.deepEqual(back.optimizer.m.get(k), m);
  const sgd = await readValueState(dir, 64, 99, "sgd");
  assert.equal(sgd.optimizer.step, 0, "another optimizer starts fresh");
  assert.deepEqual(sgd.weights.get("value_head.2.bias"), saved.weights.get("value_head.2.bias"));
  const fresh = await readValueState(await Deno.makeTempDir(), 64, 5, "adamw");
  assert.deepEqual(
    fresh.weights.get("value_head.0.weight"),
    saved.weights.get("value_head.0.weight"),
    "seeded",
  );
  await assert.rejects(
    () => readValueState(dir, 32, 5, "adamw"),
    (e) =>
      e instanceof UserError && /value_head\.0\.weight/.test(e.message) && /hidden size 32/.test(e.message),
  );
});
