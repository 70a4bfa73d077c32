/**
 * The train graph against independent float64 yardsticks: LoRA gradients of the full objective (every
 * aggregation, with and without KL) against central finite differences of the float64 reference model
 * plus the plain-TypeScript objective; the loss against that objective on the returned log-probs;
 * one SGD step against minus the gradient; micro-batching against the whole batch; AdamW touching
 * every tensor; a saved adapter reloading to the same log-probs.
 *
 * The models have a 512-token vocabulary (no tokenizer) so the float64 reference runs in milliseconds.
 * Tolerances: gradients are float32 sums compared with float64 differences; directional derivatives
 * agree to ≤ 1.1e-4 relative (observed; the largest where a derivative of ~1e-2 comes from cancelling
 * terms), checked at 1e-3 relative + 1e-6 absolute so that another CPU's float32 rounding still passes.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { type Adapter, initLoraWeights, type LoraSpec, loraTensorSpecs } from "../../lib/model/lora.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { writePeftAdapter } from "../../lib/model/peft.ts";
import {
  type Aggregation,
  aggregationWeights,
  planMicroBatches,
  type TrainEpisode,
  unshift,
} from "../../lib/train/batch.ts";
import { initOptimizerState, optimizerStep } from "../../lib/train/optimizer.ts";
import { accumulate, type StepSettings, trainOnBatch } from "../../lib/train/step.ts";
import { type LossScalars, Trainer } from "../../lib/train/trainer.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { randomAdapter, referenceLoraOf } from "../helpers/adapters.ts";
import { readReferenceWeights } from "../helpers/reference_model.ts";
import { objective, type ObjectiveSettings } from "../reference/objective.ts";
import { Qwen3Reference } from "../reference/qwen3_f64.ts";
import { mulberry32 } from "../reference/weights.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
const MAX_RESPONSE = 24;

async function smallModel(kvHeads = 2) {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11, kvHeads });
  return { dir, model: await openModelDir(dir), ref: await readReferenceWeights(dir) };
}

/** Episodes with prompt tokens unmasked, ratios spread around 1 (some clipped on each side). */
function episodes(ref: Qwen3Reference, lengths: number[], seed: number, temperature: number): TrainEpisode[] {
  const rand = mulberry32(seed);
  return lengths.map((n, i) => {
    const tokens = Array.from({ length: n }, () => Math.floor(rand() * VOCAB));
    const lp = ref.logprobs(tokens, temperature);
    const prompt = 2 + i;
    const advantages = tokens.map(() => (i % 2 ? -1 : 1) * (0.5 + rand()));
    return {
      tokens,
      lossMask: tokens.map((_, t) => (t >= prompt ? 1 : 0)),
      inputs: {
        advantages,
        old_logprobs: tokens.map((_, t) => (t === 0 ? 0 : lp[t] + (rand() - 0.5) * 0.8)),
      },
    };
  });
}

/** The reference's aggregation names: ours, plus `sft` for the sft objective (token_mean weights). */
type Case = ObjectiveSettings["aggregation"];

/** The trainer's objective and aggregation for a reference case. */
function trainerCase(c: Case): { objective: "clipped" | "sft"; aggregation: Aggregation } {
  return c === "sft"
    ? { objective: "sft", aggregation: "token_mean" }
    : { objective: "clipped", aggregation: c };
}

function settings(aggregation: Case, beta: number): ObjectiveSettings & { scalars: LossScalars } {
  const scalars = { temperature: 0.9, epsLow: 0.2, epsHigh: 0.28, beta };
  return { aggregation, epsLow: 0.2, epsHigh: 0.28, beta, maxResponseTokens: MAX_RESPONSE, scalars };
}

/** The float64 loss of `adapter` (with `delta · direction` added to tensor `key`). */
function referenceLoss(
  base: Awaited<ReturnType<typeof readReferenceWeights>>,
  adapter: Adapter,
  eps: readonly TrainEpisode[],
  s: ReturnType<typeof settings>,
  key?: string,
  direction?: Float64Array,
  delta = 0,
): number {
  const weights = new Map([...adapter.weights].map(([k, v]) => [k, Float64Array.from(v)]));
  if (key) weights.get(key)!.forEach((v, i, a) => (a[i] = v + delta * direction![i]));
  const lora = referenceLoraOf(base.config, { spec: adapter.spec, weights } as unknown as Adapter);
  const model = new Qwen3Reference(base.config, base.weights, lora);
  return objective(
    eps.map((e) => ({
      logprobs: model.logprobs([...e.tokens as number[]], s.scalars.temperature),
      old: e.inputs.old_logprobs,
      advantages: e.inputs.advantages,
      mask: e.lossMask,
      ref: e.inputs.ref_logprobs,
    })),
    s,
  );
}

const CASES: [Case, number][] = [
  ["token_mean", 0],
  ["token_mean", 0.1],
  ["seq_mean_token_mean", 0],
  ["seq_mean_token_mean", 0.1],
  ["seq_mean_token_sum_norm", 0],
  ["seq_mean_token_sum_norm", 0.1],
  ["sft", 0],
];

Deno.test("LoRA gradients of the objective match float64 finite differences (every aggregation, ± KL)", async () => {
  await checkGradients(await smallModel(), CASES);
});

Deno.test("LoRA gradients match finite differences with 4 or 1 query heads per key/value head", async () => {
  for (const kvHeads of [1, 4]) await checkGradients(await smallModel(kvHeads), [["token_mean", 0.1]]);
});

async function checkGradients(small: Awaited<ReturnType<typeof smallModel>>, cases: [Case, number][]) {
  const { model, ref: base } = small;
  const adapter = randomAdapter(model.config, SPEC, 21, 0.2);
  const trainers = new Map<string, Trainer>();
  try {
    for (const [aggregation, beta] of cases) {
      const s = settings(aggregation, beta);
      const { objective: objectiveName, aggregation: trainerAggregation } = trainerCase(aggregation);
      const key = `${objectiveName}:${beta > 0}`;
      if (!trainers.has(key)) {
        trainers.set(
          key,
          await Trainer.create(model, { lora: SPEC, objective: objectiveName, withReference: beta > 0 }),
        );
      }
      const refModel = new Qwen3Reference(base.config, base.weights);
      const eps = episodes(refModel, [9, 14, 6], 3, s.scalars.temperature).map((e) => ({
        ...e,
        inputs: beta > 0
          ? {
            ...e.inputs,
            ref_logprobs: Float32Array.from(
              refModel.logprobs([...e.tokens as number[]], s.scalars.temperature),
            ),
          }
          : e.inputs,
      }));
      const weights = aggregationWeights(eps, trainerAggregation, MAX_RESPONSE);
      const mbs = planMicroBatches(eps, weights, 64, trainers.get(key)!.maxChunk);
      const { grads } = await accumulate(trainers.get(key)!, mbs, adapter.weights, s.scalars);
      const rand = mulberry32(5);
      for (const t of loraTensorSpecs(model.config, SPEC)) {
        const dir = Float64Array.from({ length: t.dims[0] * t.dims[1] }, () => rand() * 2 - 1);
        const h = 1e-5;
        const fd = (referenceLoss(base, adapter, eps, s, t.key, dir, h) -
          referenceLoss(base, adapter, eps, s, t.key, dir, -h)) / (2 * h);
        const g = grads.get(t.key)!;
        const analytic = g.reduce((acc, v, i) => acc + v * dir[i], 0);
        assert.ok(
          Math.abs(analytic - fd) <= 1e-3 * Math.abs(fd) + 1e-6,
          `${aggregation} beta ${beta} ${t.key}: graph ${analytic}, finite difference ${fd}`,
        );
      }
    }
  } finally {
    for (const t of trainers.values()) await t.close();
  }
}

/** Settings of `trainOnBatch` around `s`. */
function stepSettings(s: ReturnType<typeof settings>, overrides: Partial<StepSettings> = {}): StepSettings {
  return {
    aggregation: trainerCase(s.aggregation).aggregation,
    maxResponseTokens: MAX_RESPONSE,
    microBatchTokens: 64,
    numIterations: 1,
    optimizer: { name: "sgd", lr: 1, max_grad_norm: 0, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 },
    schedule: { name: "constant", warmup_steps: 0, min_lr_ratio: 0 },
    totalSteps: 1,
    scalars: s.scalars,
    seed: 0,
    ...overrides,
  };
}

Deno.test("one SGD step (lr 1) moves the adapter by minus the gradient; the loss equals the formula", async () => {
  const { model, ref: base } = await smallModel();
  const adapter = randomAdapter(model.config, SPEC, 22, 0.2);
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "clipped", withReference: false });
  try {
    const s = settings("token_mean", 0);
    const eps = episodes(
      new Qwen3Reference(base.config, base.weights),
      [12, 7, 10],
      4,
      s.scalars.temperature,
    );
    const mbs = planMicroBatches(
      eps,
      aggregationWeights(eps, "token_mean", MAX_RESPONSE),
      64,
      trainer.maxChunk,
    );
    const before = new Map([...adapter.weights].map(([k, v]) => [k, v.slice()]));
    const sums = await accumulate(trainer, mbs, adapter.weights, s.scalars);
    const logprobs = new Map<number, Float32Array>();
    for (const mb of mbs) {
      const out = await trainer.run(mb, adapter.weights, s.scalars);
      mb.episodes.forEach((e, row) => logprobs.set(e, unshift(out.logprobs, mb, row, eps[e].tokens.length)));
    }
    const formula = objective(
      eps.map((e, i) => ({
        logprobs: logprobs.get(i)!,
        old: e.inputs.old_logprobs,
        advantages: e.inputs.advantages,
        mask: e.lossMask,
      })),
      s,
    );
    const [metrics] = await trainOnBatch(
      trainer,
      eps,
      adapter.weights,
      initOptimizerState("sgd", adapter.weights),
      stepSettings(s),
    );
    assert.ok(
      Math.abs(metrics.loss - formula) <= 1e-5 * Math.abs(formula),
      `loss ${metrics.loss} vs formula ${formula}`,
    );
    assert.ok(metrics.clip_frac > 0 && metrics.clip_frac < 1, `some ratios clipped: ${metrics.clip_frac}`);
    let num = 0, den = 0;
    for (const [k, after] of adapter.weights) {
      const g = sums.grads.get(k)!, b = before.get(k)!;
      after.forEach((v, i) => {
        num += (v - b[i] + g[i]) ** 2;
        den += g[i] ** 2;
      });
    }
    assert.ok(Math.sqrt(num / den) <= 1e-4, `relative error of the update ${Math.sqrt(num / den)}`);
  } finally {
    await trainer.close();
  }
});

Deno.test("a micro-batch's padding rows add nothing to the loss or the gradients, with the KL term at a low temperature", async () => {
  const { model } = await smallModel();
  const adapter = randomAdapter(model.config, SPEC, 22, 0.2);
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "clipped", withReference: true });
  try {
    // 12 tokens, 9 in the loss: the head's 9 rows are padded to 32 with rows that predict token 0.
    const tokens = Array.from({ length: 12 }, (_, i) => (i * 37 + 5) % VOCAB);
    const zeros = () => tokens.map(() => 0);
    const episode: TrainEpisode = {
      tokens,
      lossMask: tokens.map((_, t) => (t >= 3 ? 1 : 0)),
      inputs: { old_logprobs: zeros(), advantages: tokens.map(() => 1), ref_logprobs: zeros() },
    };
    const [mb] = planMicroBatches([episode], aggregationWeights([episode], "token_mean", 16), 64, 64);
    assert.ok(mb.headCount < mb.headRows.length, "the head has padding rows");
    for (const temperature of [1, 0.01]) {
      const scalars: LossScalars = { temperature, epsLow: 0.2, epsHigh: 0.2, beta: 0.1 };
      // The real rows' old and reference log-probs are the policy's own: ratio 1, KL 0.
      const lp = await trainer.logprobs(mb, adapter.weights, scalars);
      for (const name of ["old_logprobs", "ref_logprobs"]) mb.inputs[name].set(lp.subarray(0, mb.headCount));
      if (temperature < 1) {
        // Where a padding row's log-prob is below -88.7, exp(0 - lp) overflows float32.
        assert.ok(
          lp[mb.headCount] < -100,
          `the padding rows' log-prob at T ${temperature}: ${lp[mb.headCount]}`,
        );
      }
      const out = await trainer.run(mb, adapter.weights, scalars);
      assert.ok(Number.isFinite(out.loss), `T ${temperature}: loss ${out.loss}`);
      assert.ok(Math.abs(out.loss + 1) < 1e-5, `T ${temperature}: the loss is -mean(advantage): ${out.loss}`);
      for (const [name, g] of out.grads) {
        assert.ok(g.every(Number.isFinite), `T ${temperature}: ${name} finite`);
      }
    }
  } finally {
    await trainer.close();
  }
});

Deno.test("the trainer reuses the grouped adapter within an optimizer step and rebuilds it after one", async () => {
  const { model, ref: base } = await smallModel();
  const adapter = randomAdapter(model.config, SPEC, 23, 0.2);
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "clipped", withReference: false });
  try {
    const s = settings("token_mean", 0);
    const eps = episodes(new Qwen3Reference(base.config, base.weights), [12, 7], 5, s.scalars.temperature);
    const [mb] = planMicroBatches(
      eps,
      aggregationWeights(eps, "token_mean", MAX_RESPONSE),
      64,
      trainer.maxChunk,
    );
    const first = await trainer.run(mb, adapter.weights, s.scalars);
    assert.deepEqual((await trainer.run(mb, adapter.weights, s.scalars)).logprobs, first.logprobs);
    assert.equal(trainer.groupBuilds, 1, "two micro-batch runs of one step build the groups once");
    const rule = { name: "sgd", betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 } as const;
    optimizerStep(adapter.weights, first.grads, initOptimizerState("sgd", adapter.weights), rule, 1);
    const after = await trainer.run(mb, adapter.weights, s.scalars); // the same map, updated in place
    const copy = new Map([...adapter.weights].map(([k, v]) => [k, v.slice()]));
    assert.deepEqual(
      after.logprobs,
      (await trainer.run(mb, copy, s.scalars)).logprobs,
      "the updated adapter",
    );
    assert.notDeepEqual(after.logprobs, first.logprobs, "the step moved the log-probs");
    assert.equal(trainer.groupBuilds, 3, "rebuilt after the step, and for the copy");
    // A reference pass from the starting adapter between policy passes (train.loss.reference: initial).
    await trainer.run(mb, adapter.weights, s.scalars);
    await trainer.run(mb, copy, s.scalars);
    await trainer.run(mb, adapter.weights, s.scalars);
    assert.equal(trainer.groupBuilds, 3, "two maps run in turn keep their groups");
  } finally {
    await trainer.close();
  }
});

Deno.test("micro-batched accumulation equals one pass over the whole batch", async () => {
  const { model, ref: base } = await smallModel();
  const adapter = randomAdapter(model.config, SPEC, 23, 0.2);
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "clipped", withReference: false });
  try {
    const s = settings("seq_mean_token_mean", 0);
    const eps = episodes(
      new Qwen3Reference(base.config, base.weights),
      [12, 7, 10, 20],
      5,
      s.scalars.temperature,
    );
    const w = aggregationWeights(eps, trainerCase(s.aggregation).aggregation, MAX_RESPONSE);
    const small = planMicroBatches(eps, w, 32, trainer.maxChunk);
    const whole = planMicroBatches(eps, w, 4096, trainer.maxChunk);
    assert.equal(small.length, 4);
    assert.equal(whole.length, 1);
    const [a, b] = [
      await accumulate(trainer, small, adapter.weights, s.scalars),
      await accumulate(trainer, whole, adapter.weights, s.scalars),
    ];
    assert.ok(Math.abs(a.loss - b.loss) <= 1e-6 * Math.abs(b.loss));
    for (const [k, g] of b.grads) {
      const h = a.grads.get(k)!;
      const scale = Math.max(...g.map(Math.abs));
      g.forEach((v, i) =>
        assert.ok(Math.abs(v - h[i]) <= 1e-5 * scale + 1e-9, `${k}[${i}]: ${h[i]} vs ${v}`)
      );
    }
  } finally {
    await trainer.close();
  }
});

Deno.test("AdamW without weight decay changes every LoRA tensor (A only once B ≠ 0); the saved adapter reloads to the same log-probs", async () => {
  const { dir, model, ref: base } = await smallModel();
  // A fresh PEFT adapter (B = 0): on the first step A's gradient is exactly 0 (it reaches the loss only
  // through B), so A must stay put; on the second B ≠ 0 and every tensor must move. Weight decay is
  // off so that a zero gradient leaves a tensor unchanged and this test fails on one.
  const adapter: Adapter = { spec: SPEC, weights: initLoraWeights(model.config, SPEC, 24) };
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "clipped", withReference: true });
  try {
    const s = settings("token_mean", 0.05);
    const eps = episodes(new Qwen3Reference(base.config, base.weights), [12, 9], 6, s.scalars.temperature);
    const optimizer = {
      name: "adamw" as const,
      lr: 1e-3,
      max_grad_norm: 1,
      betas: [0.9, 0.999],
      eps: 1e-8,
      weight_decay: 0,
    };
    const state = initOptimizerState("adamw", adapter.weights);
    const step = () =>
      trainOnBatch(
        trainer,
        eps,
        adapter.weights,
        state,
        stepSettings(s, { optimizer }),
      );
    const snapshot = () => new Map([...adapter.weights].map(([k, v]) => [k, v.slice()]));
    const changed = (before: Map<string, Float32Array>, k: string) => {
      const b = before.get(k)!;
      return adapter.weights.get(k)!.filter((v, i) => v !== b[i]).length / b.length;
    };
    const start = snapshot();
    await step();
    for (const k of adapter.weights.keys()) {
      if (k.includes("lora_A")) assert.equal(changed(start, k), 0, `${k} has no gradient while B = 0`);
      else assert.ok(changed(start, k) > 0.9, `${k} changed in ${changed(start, k)} of its entries`);
    }
    const afterFirst = snapshot();
    const [m] = await step();
    assert.ok(m.kl > 0, "a KL term is reported once the adapter has moved");
    for (const k of adapter.weights.keys()) {
      assert.ok(changed(afterFirst, k) > 0.9, `${k} changed in ${changed(afterFirst, k)} of its entries`);
    }
    const out = join(await Deno.makeTempDir(), "adapter");
    await writePeftAdapter(out, adapter, model.config, dir);
    const [fromDisk, inMemory] = [
      await LocalPolicy.load(dir, { adapter: out }),
      await LocalPolicy.load(dir, { adapter }),
    ];
    try {
      const seqs = eps.map((e) => [...e.tokens as number[]]);
      const [a, b] = [await fromDisk.logprobs(seqs), await inMemory.logprobs(seqs)];
      a.forEach((lp, i) => assert.deepEqual(Array.from(lp.slice(1)), Array.from(b[i].slice(1))));
      const ref = new Qwen3Reference(base.config, base.weights, referenceLoraOf(model.config, adapter));
      seqs.forEach((seq, i) => {
        const r = ref.logprobs(seq);
        for (let t = 1; t < seq.length; t++) assert.ok(Math.abs(a[i][t] - r[t]) < 1e-4);
      });
    } finally {
      await fromDisk.close();
      await inMemory.close();
    }
  } finally {
    await trainer.close();
  }
});
