/**
 * Optimizers, clipping, schedules (lib/train/optimizer.ts) and the batch layout (lib/train/batch.ts)
 * against hand-computed values; the optimizer's counts through a checkpoint (lib/train/checkpoint.ts).
 */

import assert from "node:assert/strict";
import {
  clipGradNorm,
  initOptimizerState,
  momentStepsOf,
  optimizerStep,
  type ScheduleConfig,
  scheduledLr,
} from "../../lib/train/optimizer.ts";
import { aggregationWeights, planMicroBatches, unshift } from "../../lib/train/batch.ts";
import { loadCheckpoint, saveCheckpoint } from "../../lib/train/checkpoint.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const close = (a: number, b: number, tol = 1e-6) => assert.ok(Math.abs(a - b) <= tol, `${a} vs ${b}`);

Deno.test("AdamW: two bias-corrected steps with decoupled weight decay, as torch.optim.AdamW", () => {
  const params = new Map([["w", Float32Array.from([1, -2])]]);
  const state = initOptimizerState("adamw", params);
  const config = { name: "adamw" as const, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.1 };
  const g1 = Float32Array.from([0.5, -1]), g2 = Float32Array.from([0.1, 0.3]);
  optimizerStep(params, new Map([["w", g1]]), state, config, 0.01);
  // Step 1: m̂ = g, v̂ = g², update = g / |g| = sign(g); p = p(1 - lr·wd) - lr·sign(g).
  close(params.get("w")![0], 1 * (1 - 0.001) - 0.01);
  close(params.get("w")![1], -2 * (1 - 0.001) + 0.01);
  const p1 = Float64Array.from(params.get("w")!);
  optimizerStep(params, new Map([["w", g2]]), state, config, 0.01);
  for (let i = 0; i < 2; i++) {
    const m = 0.9 * 0.1 * g1[i] + 0.1 * g2[i], v = 0.999 * 0.001 * g1[i] ** 2 + 0.001 * g2[i] ** 2;
    const update = (m / (1 - 0.9 ** 2)) / (Math.sqrt(v / (1 - 0.999 ** 2)) + 1e-8);
    close(params.get("w")![i], p1[i] * (1 - 0.001) - 0.01 * update, 1e-6);
  }
  assert.equal(state.step, 2);
});

/**
 * torch.optim.AdamW's update (torch/optim/adamw.py, single-tensor path, amsgrad off), in float64:
 *   p ← p · (1 − lr · wd)                       decoupled weight decay, before the Adam step
 *   m ← β1 · m + (1 − β1) · g
 *   v ← β2 · v + (1 − β2) · g²
 *   p ← p − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + ε)    ε outside the square root
 */
function torchAdamW(
  p: Float64Array,
  g: ArrayLike<number>,
  m: Float64Array,
  v: Float64Array,
  t: number,
  lr: number,
  [b1, b2]: number[],
  eps: number,
  wd: number,
): void {
  const bias1 = 1 - b1 ** t, bias2 = 1 - b2 ** t;
  for (let i = 0; i < p.length; i++) {
    p[i] *= 1 - lr * wd;
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const denom = Math.sqrt(v[i]) / Math.sqrt(bias2) + eps;
    p[i] -= (lr / bias1) * (m[i] / denom);
  }
}

Deno.test("AdamW matches torch's formula over five steps on three tensors, with weight decay and a zero gradient", () => {
  const config = { name: "adamw" as const, betas: [0.8, 0.95], eps: 1e-3, weight_decay: 0.3 };
  const shapes: Record<string, number> = { a: 6, b: 4, c: 3 };
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31) * 2 - 1;
  const params = new Map(Object.entries(shapes).map(([k, n]) => [k, Float32Array.from({ length: n }, rand)]));
  const ref = new Map(
    [...params].map((
      [k, p],
    ) => [k, { p: Float64Array.from(p), m: new Float64Array(p.length), v: new Float64Array(p.length) }]),
  );
  const state = initOptimizerState("adamw", params);
  const lrs = [0.05, 0.05, 0.02, 0.1, 0.01];
  lrs.forEach((lr, step) => {
    // Step 3 has an all-zero gradient: the moments decay and the parameters still move (as in torch).
    const grads = new Map(
      [...params].map(([k, p]) => [k, Float32Array.from(p, () => (step === 2 ? 0 : rand()))]),
    );
    optimizerStep(params, grads, state, config, lr);
    for (const [k, r] of ref) {
      torchAdamW(r.p, grads.get(k)!, r.m, r.v, step + 1, lr, config.betas, config.eps, config.weight_decay);
      params.get(k)!.forEach((x, i) => close(x, r.p[i], 2e-6));
      state.m.get(k)!.forEach((x, i) => close(x, r.m[i], 1e-6));
      state.v.get(k)!.forEach((x, i) => close(x, r.v[i], 1e-6));
    }
  });
  assert.equal(state.step, 5);
});

Deno.test("a checkpoint resumed with another optimizer keeps its step for the schedule and starts AdamW's bias correction afresh; with the same one it keeps both", async () => {
  const model = await openModelDir(await makeTinyModel({ vocab: 512, tokenizer: false, seed: 3 }));
  const adapter = randomAdapter(model.config, { r: 2, alpha: 4, rslora: false, targets: ["q", "v"] }, 4, 0.2);
  const info = { baseModel: "tiny", baseConfigSha256: "0", configHash: "0" };
  const dir = await Deno.makeTempDir();
  const sgd = { ...initOptimizerState("sgd", adapter.weights), step: 1000, momentSteps: 1000 };
  await saveCheckpoint(dir, { adapter, optimizer: sgd }, model.config, info);
  const resumed = await loadCheckpoint(dir, model.config, "adamw");
  assert.equal(resumed.optimizer.step, 1000, "the schedule goes on from the saved step");
  assert.equal(resumed.optimizer.momentSteps, 0, "fresh moments");
  // AdamW's first step on fresh moments moves each entry by lr, whatever the step count (with the step's
  // bias correction it moved by about 2.5 · lr).
  const params = resumed.adapter.weights;
  const before = new Map([...params].map(([k, p]) => [k, p.slice()]));
  const grads = new Map([...params].map(([k, p]) => [k, new Float32Array(p.length).fill(0.5)]));
  const rule = { name: "adamw" as const, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 };
  optimizerStep(params, grads, resumed.optimizer, rule, 1e-3);
  for (const [k, p] of params) p.forEach((x, i) => close(before.get(k)![i] - x, 1e-3, 1e-6));

  await Deno.remove(dir, { recursive: true });
  await saveCheckpoint(dir, resumed, model.config, info);
  const again = await loadCheckpoint(dir, model.config, "adamw");
  assert.deepEqual([again.optimizer.step, again.optimizer.momentSteps], [1001, 1]);
  assert.deepEqual(again.optimizer.m, resumed.optimizer.m);
  await Deno.remove(dir, { recursive: true });
  // A file from before the two counts: moments as old as the step. A count that cannot be: refused.
  assert.equal(momentStepsOf({}, 7), 7);
  for (const bad of ["x", "-1", "8", "1.5"]) {
    assert.throws(() => momentStepsOf({ moment_steps: bad }, 7), /moment_steps \(got /);
  }
});

Deno.test("SGD subtracts lr · (g + wd · p); clipping scales to the max norm and reports the norm before", () => {
  const params = new Map([["w", Float32Array.from([1, 2])]]);
  const sgd = { name: "sgd" as const, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0.5 };
  optimizerStep(
    params,
    new Map([["w", Float32Array.from([1, 1])]]),
    initOptimizerState("sgd", params),
    sgd,
    0.1,
  );
  close(params.get("w")![0], 1 - 0.1 * (1 + 0.5));
  close(params.get("w")![1], 2 - 0.1 * (1 + 1));
  const grads = new Map([["a", Float32Array.from([3, 0])], ["b", Float32Array.from([4])]]);
  assert.equal(clipGradNorm(grads, 1), 5);
  close(grads.get("a")![0], 3 / 5, 1e-6);
  close(grads.get("b")![0], 4 / 5, 1e-6);
  close(clipGradNorm(grads, 0), 1, 1e-6); // off: no scaling, still reports the norm
});

Deno.test("schedules: linear warm-up, then constant, cosine or linear decay to lr · min_lr_ratio", () => {
  const s = (name: ScheduleConfig["name"]): ScheduleConfig => ({ name, warmup_steps: 2, min_lr_ratio: 0.1 });
  assert.deepEqual([1, 2, 3, 10].map((k) => scheduledLr(1, k, 10, s("constant"))), [0.5, 1, 1, 1]);
  close(scheduledLr(1, 10, 10, s("cosine")), 0.1);
  close(scheduledLr(1, 6, 10, s("cosine")), 0.1 + 0.9 * 0.5);
  close(scheduledLr(1, 6, 10, s("linear")), 0.1 + 0.9 * 0.5);
  close(scheduledLr(1, 10, 10, s("linear")), 0.1);
});

Deno.test("aggregation weights sum as each aggregation says; token 0 and unmasked tokens weigh 0", () => {
  const ep = (mask: number[]) => ({
    tokens: mask.map((_, i) => i),
    lossMask: mask,
    inputs: { advantages: mask.map(() => 1), old_logprobs: mask.map(() => 0) },
  });
  const eps = [ep([1, 1, 1, 0]), ep([0, 0, 1, 1, 1, 1]), ep([0, 0])];
  const sum = (w: Float32Array) => w.reduce((a, b) => a + b, 0);
  const token = aggregationWeights(eps, "token_mean", 10);
  assert.equal(token[0][0], 0);
  close(token.map(sum).reduce((a, b) => a + b, 0), 1);
  const seq = aggregationWeights(eps, "seq_mean_token_mean", 10);
  close(sum(seq[0]), 0.5);
  close(sum(seq[1]), 0.5);
  assert.equal(sum(seq[2]), 0);
  const dr = aggregationWeights(eps, "seq_mean_token_sum_norm", 10);
  close(dr[1][2], 1 / 30);
  assert.deepEqual(aggregationWeights([ep([0, 0])], "token_mean", 10)[0], new Float32Array(2));
});

Deno.test("micro-batches shift per-token arrays by one, keep weighted rows for the head, chunk evenly", () => {
  const e = {
    tokens: [10, 11, 12, 13],
    lossMask: [0, 1, 1, 1],
    inputs: { advantages: [0, 1, 2, 3], old_logprobs: [0, -1, -2, -3] },
  };
  const w = aggregationWeights([e], "token_mean", 10);
  const [mb] = planMicroBatches([e], w, 1000, 7);
  assert.equal(mb.width, 32);
  assert.equal(32 % mb.chunk, 0);
  assert.ok(mb.chunk <= 7);
  assert.deepEqual(Array.from(mb.ids.slice(0, 5), Number), [10, 11, 12, 13, 0]);
  assert.equal(mb.headCount, 3, "positions 0, 1, 2 predict the three weighted tokens");
  assert.equal(mb.headRows.length % mb.chunk, 0);
  assert.deepEqual(Array.from(mb.headRows.slice(0, 3), Number), [0, 1, 2]);
  assert.deepEqual(Array.from(mb.targets.slice(0, 4), Number), [11, 12, 13, 0]);
  assert.deepEqual(Array.from(mb.inputs.old_logprobs.slice(0, 4)), [-1, -2, -3, 0]);
  assert.deepEqual(Array.from(mb.inputs.advantages.slice(0, 4)), [1, 2, 3, 0]);
  const back = unshift(Float32Array.from({ length: 32 }, (_, i) => i), mb, 0, 4);
  assert.ok(Number.isNaN(back[0]));
  assert.deepEqual(Array.from(back.slice(1)), [0, 1, 2]);
});
