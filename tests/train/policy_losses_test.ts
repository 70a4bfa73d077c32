/**
 * GSPO and CISPO (lib/losses/gspo.ts, cispo.ts) against independent float64 yardsticks: the LoRA
 * gradient of each loss against central finite differences of the float64 reference model plus the
 * plain-TypeScript rule (tests/reference/objective.ts, whose stop-gradients are constants taken at the
 * point of the gradient), and the loss against that rule; on ragged episodes with masked spans, in several
 * micro-batches, with old log-probs that make ratios clip on both sides, for every aggregation and with
 * the KL term. GSPO's sequence log-ratio comes from the trainer's own pass (passes.ts
 * `withComputedInputs`, which step.ts runs before each optimizer step).
 *
 * Tolerances as tests/train/trainer_test.ts: 1e-3 relative + 1e-6 absolute on directional derivatives
 * (float32 sums against float64 differences); 1e-5 relative + 2e-6 absolute on the loss, whose float32
 * sum of token terms of order 1/tokens cancels to ~1e-2 here (observed error up to 9e-7).
 */

import assert from "node:assert/strict";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { type Adapter, type LoraSpec, loraTensorSpecs } from "../../lib/model/lora.ts";
import {
  type Aggregation,
  aggregationWeights,
  planMicroBatches,
  type TrainEpisode,
} from "../../lib/train/batch.ts";
import { accumulate, withComputedInputs } from "../../lib/train/passes.ts";
import { type StepSettings, trainOnBatch } from "../../lib/train/step.ts";
import { initOptimizerState } from "../../lib/train/optimizer.ts";
import { Trainer } from "../../lib/train/trainer.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { randomAdapter, referenceLoraOf } from "../helpers/adapters.ts";
import { readReferenceWeights } from "../helpers/reference_model.ts";
import { objective, type ObjectiveSettings } from "../reference/objective.ts";
import { Qwen3Reference } from "../reference/qwen3_f64.ts";
import { mulberry32 } from "../reference/weights.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
const MAX_RESPONSE = 24;
const TEMPERATURE = 0.9;
/** Per episode: the advantage's sign and the shift of the old log-probs (log s ≈ −shift). */
const EPISODES = [
  { length: 9, sign: 1, shift: -0.3 }, // s above 1 + eps_high, A > 0: clipped above
  { length: 14, sign: -1, shift: 0.3 }, // s below 1 - eps_low, A < 0: clipped below
  { length: 6, sign: 1, shift: 0.3 }, // s below, A > 0: the unclipped branch holds
  { length: 11, sign: -1, shift: -0.3 }, // s above, A < 0: the unclipped branch holds
];

type Base = Awaited<ReturnType<typeof readReferenceWeights>>;

function referenceModel(base: Base, adapter: Adapter, key?: string, direction?: Float64Array, delta = 0) {
  const weights = new Map([...adapter.weights].map(([k, v]) => [k, Float64Array.from(v)]));
  if (key) weights.get(key)!.forEach((v, i, a) => (a[i] = v + delta * direction![i]));
  const lora = referenceLoraOf(base.config, { spec: adapter.spec, weights } as unknown as Adapter);
  return new Qwen3Reference(base.config, base.weights, lora);
}

/**
 * Ragged episodes, each with a masked span inside its response (a tool result), advantages of one sign
 * per episode with a per-token spread, and old log-probs = the adapter's own (float64) + the episode's
 * shift + noise of ±0.4: token ratios clip on both sides, and so do GSPO's sequence ratios.
 */
function episodes(model: Qwen3Reference, base: Qwen3Reference, seed: number): TrainEpisode[] {
  const rand = mulberry32(seed);
  return EPISODES.map(({ length, sign, shift }, i) => {
    const tokens = Array.from({ length }, () => Math.floor(rand() * VOCAB));
    const lp = model.logprobs(tokens, TEMPERATURE);
    const prompt = 2 + (i % 2);
    return {
      tokens,
      lossMask: tokens.map((_, t) => (t >= prompt && !(t >= prompt + 2 && t < prompt + 4) ? 1 : 0)),
      inputs: {
        advantages: tokens.map(() => sign * (0.5 + rand())),
        old_logprobs: tokens.map((_, t) => (t === 0 ? 0 : lp[t] + shift + (rand() - 0.5) * 0.8)),
        ref_logprobs: Float32Array.from(base.logprobs(tokens, TEMPERATURE)),
      },
    };
  });
}

/** The tiny model, its float64 reference weights, an adapter, its float64 model and episodes under it. */
async function fixture() {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11, kvHeads: 2 });
  const model = await openModelDir(dir);
  const base = await readReferenceWeights(dir);
  const adapter = randomAdapter(model.config, SPEC, 21, 0.2);
  const at = referenceModel(base, adapter);
  const eps = episodes(at, new Qwen3Reference(base.config, base.weights), 3);
  return { model, base, adapter, at, eps };
}

function referenceLoss(
  model: Qwen3Reference,
  eps: readonly TrainEpisode[],
  frozen: readonly ArrayLike<number>[],
  s: ObjectiveSettings,
): number {
  return objective(
    eps.map((e, i) => ({
      logprobs: model.logprobs([...e.tokens as number[]], TEMPERATURE),
      old: e.inputs.old_logprobs,
      advantages: e.inputs.advantages,
      mask: e.lossMask,
      ref: e.inputs.ref_logprobs,
      frozen: frozen[i],
    })),
    s,
  );
}

const CASES: [Aggregation, number][] = [
  ["token_mean", 0],
  ["seq_mean_token_mean", 0],
  ["seq_mean_token_sum_norm", 0],
  ["token_mean", 0.1],
];

async function checkLoss(loss: "gspo" | "cispo") {
  const { model, base, adapter, at, eps } = await fixture();
  const frozen = eps.map((e) => at.logprobs([...e.tokens as number[]], TEMPERATURE));
  assertClipsBothSides(loss, eps, frozen);
  for (const withReference of [false, true]) {
    const trainer = await Trainer.create(model, { lora: SPEC, objective: loss, withReference });
    try {
      for (const [aggregation, beta] of CASES.filter(([, b]) => b > 0 === withReference)) {
        const scalars = { temperature: TEMPERATURE, epsLow: 0.2, epsHigh: 0.2, beta };
        const s: ObjectiveSettings = {
          aggregation,
          epsLow: 0.2,
          epsHigh: 0.2,
          beta,
          maxResponseTokens: MAX_RESPONSE,
          loss,
        };
        const weights = aggregationWeights(eps, aggregation, MAX_RESPONSE);
        const settings = { scalars, microBatchTokens: 64 } as StepSettings;
        const withInputs = await withComputedInputs(trainer, eps, adapter.weights, settings);
        const mbs = planMicroBatches(withInputs, weights, 64, trainer.maxChunk);
        assert.ok(mbs.length > 1, "several micro-batches");
        const sums = await accumulate(trainer, mbs, adapter.weights, scalars);
        const expected = referenceLoss(at, eps, frozen, s);
        const label = `${loss} ${aggregation} beta ${beta}`;
        assert.ok(
          Math.abs(sums.loss - expected) <= 1e-5 * Math.abs(expected) + 2e-6,
          `${label}: loss ${sums.loss} vs ${expected}`,
        );
        assert.ok(sums.clipped > 0, `${label}: some tokens clipped`);
        const rand = mulberry32(5);
        for (const t of loraTensorSpecs(model.config, SPEC)) {
          const direction = Float64Array.from({ length: t.dims[0] * t.dims[1] }, () => rand() * 2 - 1);
          const h = 1e-5;
          const moved = (delta: number) =>
            referenceLoss(referenceModel(base, adapter, t.key, direction, delta), eps, frozen, s);
          const fd = (moved(h) - moved(-h)) / (2 * h);
          const analytic = sums.grads.get(t.key)!.reduce((acc, v, i) => acc + v * direction[i], 0);
          assert.ok(
            Math.abs(analytic - fd) <= 1e-3 * Math.abs(fd) + 1e-6,
            `${label} ${t.key}: graph ${analytic}, finite difference ${fd}`,
          );
        }
      }
    } finally {
      await trainer.close();
    }
  }
}

/** The fixture does what it promises: ratios (GSPO's per episode, CISPO's per token) clip on both sides. */
function assertClipsBothSides(
  loss: "gspo" | "cispo",
  eps: readonly TrainEpisode[],
  frozen: readonly ArrayLike<number>[],
) {
  const ratios = eps.flatMap((e, i) => {
    const masked = Array.from(e.lossMask).map((m, t) => (m && t > 0 ? t : -1)).filter((t) => t > 0);
    const logs = masked.map((t) => frozen[i][t] - e.inputs.old_logprobs[t]);
    return loss === "gspo" ? [Math.exp(logs.reduce((a, b) => a + b, 0) / logs.length)] : logs.map(Math.exp);
  });
  assert.ok(ratios.some((r) => r > 1.2) && ratios.some((r) => r < 0.8), `ratios on both sides: ${ratios}`);
}

Deno.test("GSPO's LoRA gradient and loss match float64 finite differences (every aggregation, ± KL, both clips)", async () => {
  await checkLoss("gspo");
});

Deno.test("CISPO's LoRA gradient and loss match float64 finite differences (every aggregation, ± KL, both clips)", async () => {
  await checkLoss("cispo");
});

Deno.test("trainOnBatch computes GSPO's sequence ratio before each optimizer step, with that step's parameters", async () => {
  const { model, base, adapter, eps } = await fixture();
  const scalars = { temperature: TEMPERATURE, epsLow: 0.2, epsHigh: 0.2, beta: 0 };
  const s: ObjectiveSettings = {
    aggregation: "token_mean",
    epsLow: 0.2,
    epsHigh: 0.2,
    beta: 0,
    maxResponseTokens: MAX_RESPONSE,
    loss: "gspo",
  };
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "gspo", withReference: false });
  try {
    const params = new Map([...adapter.weights].map(([k, v]) => [k, v.slice()]));
    const snapshots: Adapter[] = [];
    const rows = await trainOnBatch(trainer, eps, params, initOptimizerState("sgd", params), {
      aggregation: "token_mean",
      maxResponseTokens: MAX_RESPONSE,
      microBatchTokens: 64,
      numIterations: 2,
      optimizer: { name: "sgd", lr: 0.5, max_grad_norm: 0, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 },
      schedule: { name: "constant", warmup_steps: 0, min_lr_ratio: 0 },
      totalSteps: 2,
      scalars,
      seed: 0,
      onStep: () =>
        snapshots.push({ spec: SPEC, weights: new Map([...params].map(([k, v]) => [k, v.slice()])) }),
    });
    // Pass 2 runs with the parameters after step 1: its sequence ratio must be theirs.
    const at = referenceModel(base, snapshots[0]);
    const frozen = eps.map((e) => at.logprobs([...e.tokens as number[]], TEMPERATURE));
    const expected = referenceLoss(at, eps, frozen, s);
    assert.ok(
      Math.abs(rows[1].loss - expected) <= 1e-5 * Math.abs(expected) + 2e-6,
      `pass 2 loss ${rows[1].loss} vs ${expected}`,
    );
  } finally {
    await trainer.close();
  }
});

Deno.test("on policy (old log-probs the trainer's own, every ratio 1) CISPO's gradient is the clipped objective's, bit for bit", async () => {
  // Both give -A · ∇log π per token when r = 1 exactly: with one optimizer step per batch and no
  // sampler–trainer gap, a CISPO run trains exactly as a GRPO run (BENCH.md, the algorithms table).
  const { model, adapter, eps } = await fixture();
  const scalars = { temperature: TEMPERATURE, epsLow: 0.2, epsHigh: 0.28, beta: 0 };
  const grads = [];
  for (const objective of ["clipped", "cispo"] as const) {
    const trainer = await Trainer.create(model, { lora: SPEC, objective, withReference: false });
    try {
      const [mb] = planMicroBatches(
        eps,
        aggregationWeights(eps, "token_mean", MAX_RESPONSE),
        4096,
        trainer.maxChunk,
      );
      mb.inputs.old_logprobs = (await trainer.run(mb, adapter.weights, scalars)).logprobs; // r = 1
      const result = await trainer.run(mb, adapter.weights, scalars);
      assert.deepEqual(result.logprobs, mb.inputs.old_logprobs, `${objective}: the same log-probs again`);
      // The head's real rows (its padding rows, of weight 0, read log-prob 0: lib/train/head_loss.ts).
      const clipped = result.clipped.subarray(0, mb.headCount);
      assert.equal(clipped.reduce((a, b) => a + b, 0), 0, `${objective}: nothing clipped at r = 1`);
      grads.push(result.grads);
    } finally {
      await trainer.close();
    }
  }
  for (const [key, g] of grads[0]) {
    assert.ok(g.some((v) => v !== 0), `${key}: a zero gradient proves nothing`);
    assert.deepEqual(grads[1].get(key), g, key);
  }
});
