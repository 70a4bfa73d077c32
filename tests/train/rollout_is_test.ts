/**
 * Trainer-side old log-probs with truncated importance sampling (lib/train/rollout_is.ts): the weights
 * and mismatch statistics equal hand-computed values (token and sequence level); with rollouts from the
 * local policy (no mismatch) `truncate` gives the update of `none`; with recorded log-probs equal to the
 * trainer's, every mode and level trains bit-identically to the correction off; with rollout log-probs
 * perturbed by known amounts, the trainer's metrics and loss equal a float64 computation of the rule with
 * the trainer's old log-probs and the capped or masked weights, at both levels.
 */

import assert from "node:assert/strict";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import type { LoraSpec, LoraWeights } from "../../lib/model/lora.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { aggregationWeights, type TrainEpisode } from "../../lib/train/batch.ts";
import { initOptimizerState } from "../../lib/train/optimizer.ts";
import { correctedBatch, type RolloutIs, trainerLogprobs } from "../../lib/train/rollout_is.ts";
import { type StepSettings, trainOnBatch } from "../../lib/train/step.ts";
import { Trainer } from "../../lib/train/trainer.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { mulberry32 } from "../reference/weights.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "v", "down"] };
const TEMPERATURE = 0.9;
const MAX_RESPONSE = 32;
/** Known differences old_trainer − old_rollout, cycled over the trained tokens: ρ = e, e^-0.5, 1, e^0.3. */
const DELTAS = [1.0, -0.5, 0.0, 0.3];

function settings(rolloutIs?: RolloutIs): StepSettings {
  return {
    aggregation: "token_mean",
    maxResponseTokens: MAX_RESPONSE,
    microBatchTokens: 64,
    numIterations: 1,
    optimizer: { name: "sgd", lr: 0.5, max_grad_norm: 0, betas: [0.9, 0.999], eps: 1e-8, weight_decay: 0 },
    schedule: { name: "constant", warmup_steps: 0, min_lr_ratio: 0 },
    totalSteps: 1,
    scalars: { temperature: TEMPERATURE, epsLow: 0.2, epsHigh: 0.2, beta: 0 },
    seed: 0,
    rolloutIs,
  };
}

/** Random token episodes (prompt of 3 unmasked), old log-probs from the local policy with `adapter`. */
async function localEpisodes(dir: string, params: LoraWeights): Promise<TrainEpisode[]> {
  const rand = mulberry32(5);
  const tokens = [14, 9, 20].map((n) => Array.from({ length: n }, () => Math.floor(rand() * VOCAB)));
  const policy = await LocalPolicy.load(dir, { adapter: { spec: SPEC, weights: params } });
  const lps = await policy.logprobs(tokens, { temperature: TEMPERATURE });
  await policy.close();
  return tokens.map((t, i) => ({
    tokens: t,
    lossMask: t.map((_, k) => (k >= 3 ? 1 : 0)),
    inputs: {
      advantages: t.map((_, k) => (i % 2 ? -1 : 1) * (0.5 + ((k * 7) % 5) / 10)),
      old_logprobs: Float32Array.from(lps[i], (v, k) => (k >= 3 ? v : 0)),
    },
  }));
}

async function withTrainer(fn: (trainer: Trainer, dir: string) => Promise<void>): Promise<void> {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 });
  const trainer = await Trainer.create(await openModelDir(dir), {
    lora: SPEC,
    objective: "clipped",
    withReference: false,
  });
  try {
    await fn(trainer, dir);
  } finally {
    await trainer.close();
  }
}

function copy(params: LoraWeights): LoraWeights {
  return new Map([...params].map(([k, v]) => [k, v.slice()]));
}

Deno.test("correctedBatch: truncate caps rho at C, mask drops rho > C; mean |Δ| and the clipped fraction", () => {
  const episode: TrainEpisode = {
    tokens: [1, 2, 3, 4, 5],
    lossMask: [0, 1, 1, 1, 1],
    inputs: { advantages: [0, 1, 1, 1, 1], old_logprobs: [0, -1, -2, -0.5, -3] },
  };
  const weights = [Float32Array.from([0, 0.25, 0.25, 0.25, 0.25])];
  const diffs = [1, -0.5, 0, Math.log(1.5)]; // rho = e (> 2), 0.607, 1, 1.5
  const oldTrainer = [Float32Array.from([NaN, ...diffs.map((d, i) => d + [-1, -2, -0.5, -3][i])])];
  const near = (got: ArrayLike<number>, want: number[]) =>
    want.forEach((w, i) => assert.ok(Math.abs(got[i] - w) < 1e-6, `${i}: ${got[i]} vs ${w}`));
  const truncate = correctedBatch([episode], weights, oldTrainer, { mode: "truncate", cap: 2 });
  near(truncate.weights[0], [0, 0.5, 0.25 * Math.exp(-0.5), 0.25, 0.375]);
  near(truncate.episodes[0].inputs.old_logprobs, [0, 0, -2.5, -0.5, -3 + Math.log(1.5)]);
  const mismatch = (1 + 0.5 + 0 + Math.log(1.5)) / 4;
  assert.ok(Math.abs(truncate.stats.rollout_logprob_diff - mismatch) < 1e-6);
  assert.equal(truncate.stats.rollout_is_clip_frac, 0.25);
  const kl = diffs.reduce((a, d) => a + Math.exp(d) - 1 - d, 0) / 4;
  assert.ok(Math.abs(truncate.stats.rollout_kl - kl) < 1e-6, `k3 ${truncate.stats.rollout_kl} vs ${kl}`);
  const mask = correctedBatch([episode], weights, oldTrainer, { mode: "mask", cap: 2 });
  near(mask.weights[0], [0, 0, 0.25 * Math.exp(-0.5), 0.25, 0.375]);
  assert.deepEqual(mask.stats, truncate.stats);
  // Sequence level: one ρ for the episode, exp(Σ δ) = e^(0.5 + log 1.5) ≈ 2.47.
  const rho = Math.exp(diffs.reduce((a, d) => a + d, 0));
  const seqTruncate = correctedBatch([episode], weights, oldTrainer, {
    mode: "truncate",
    level: "sequence",
    cap: 3,
  });
  near(seqTruncate.weights[0], [0, 0.25 * rho, 0.25 * rho, 0.25 * rho, 0.25 * rho]);
  assert.equal(seqTruncate.stats.rollout_is_clip_frac, 0);
  const seqCapped = correctedBatch([episode], weights, oldTrainer, {
    mode: "truncate",
    level: "sequence",
    cap: 2,
  });
  near(seqCapped.weights[0], [0, 0.5, 0.5, 0.5, 0.5]);
  assert.equal(seqCapped.stats.rollout_is_clip_frac, 1);
  const seqMask = correctedBatch([episode], weights, oldTrainer, { mode: "mask", level: "sequence", cap: 2 });
  near(seqMask.weights[0], [0, 0, 0, 0, 0]);
  assert.ok(Math.abs(seqMask.stats.rollout_kl - kl) < 1e-6, "the KL estimate is per token at either level");
});

Deno.test("with recorded log-probs equal to the trainer's, every mode and level trains bit-identically to none", async () => {
  await withTrainer(async (trainer, dir) => {
    const adapter = randomAdapter(trainer.model.config, SPEC, 9, 0.2);
    const local = await localEpisodes(dir, adapter.weights);
    const weights = aggregationWeights(local, "token_mean", MAX_RESPONSE);
    const old = await trainerLogprobs(trainer, local, weights, adapter.weights, settings().scalars, 64);
    const equal: TrainEpisode[] = local.map((e, i) => ({
      ...e,
      inputs: { ...e.inputs, old_logprobs: old[i].map((v, t) => (weights[i][t] === 0 ? 0 : v)) },
    }));
    const off = copy(adapter.weights);
    const [a] = await trainOnBatch(trainer, equal, off, initOptimizerState("sgd", off), settings());
    const rules: RolloutIs[] = [
      { mode: "mask", level: "sequence", cap: 3 },
      { mode: "truncate", level: "sequence", cap: 3 },
      { mode: "mask", level: "token", cap: 2 },
      { mode: "truncate", level: "token", cap: 2 },
    ];
    for (const rule of rules) {
      const on = copy(adapter.weights);
      const [b] = await trainOnBatch(trainer, equal, on, initOptimizerState("sgd", on), settings(rule));
      const label = `${rule.mode} ${rule.level}`;
      assert.equal(b.rolloutIs!.rollout_logprob_diff, 0, label);
      assert.equal(b.rolloutIs!.rollout_kl, 0, label);
      assert.equal(b.loss, a.loss, `${label}: the same loss bit for bit`);
      for (const [k, x] of off) assert.deepEqual(on.get(k), x, `${label}: ${k} bit for bit`);
    }
  });
});

Deno.test("with the local policy's log-probs (no mismatch), truncate gives the update of none", async () => {
  await withTrainer(async (trainer, dir) => {
    const adapter = randomAdapter(trainer.model.config, SPEC, 7, 0.2);
    const episodes = await localEpisodes(dir, adapter.weights);
    const [none, truncate] = [copy(adapter.weights), copy(adapter.weights)];
    const [a] = await trainOnBatch(trainer, episodes, none, initOptimizerState("sgd", none), settings());
    const [b] = await trainOnBatch(
      trainer,
      episodes,
      truncate,
      initOptimizerState("sgd", truncate),
      settings({ mode: "truncate", cap: 2 }),
    );
    assert.equal(a.rolloutIs, undefined);
    assert.ok(b.rolloutIs!.rollout_logprob_diff < 1e-5, `mismatch ${b.rolloutIs!.rollout_logprob_diff}`);
    assert.equal(b.rolloutIs!.rollout_is_clip_frac, 0);
    assert.ok(Math.abs(a.loss - b.loss) < 1e-5 * Math.abs(a.loss), `loss ${a.loss} vs ${b.loss}`);
    let num = 0, den = 0;
    for (const [k, start] of adapter.weights) {
      const [x, y] = [none.get(k)!, truncate.get(k)!];
      start.forEach((s, i) => {
        num += (x[i] - y[i]) ** 2;
        den += (x[i] - s) ** 2;
      });
    }
    assert.ok(den > 0, "the update moved the adapter");
    assert.ok(Math.sqrt(num / den) < 1e-4, `relative difference of the updates ${Math.sqrt(num / den)}`);
  });
});

Deno.test("with rollout log-probs off by known amounts, the weights and mismatch metrics equal the hand values", async () => {
  await withTrainer(async (trainer, dir) => {
    const adapter = randomAdapter(trainer.model.config, SPEC, 8, 0.2);
    const local = await localEpisodes(dir, adapter.weights);
    const s = settings();
    const weights = aggregationWeights(local, "token_mean", MAX_RESPONSE);
    const old = await trainerLogprobs(trainer, local, weights, adapter.weights, s.scalars, 64);
    // old_rollout = old_trainer − δ for the trained tokens, δ cycling through DELTAS.
    let n = 0;
    const deltas: number[] = [];
    const shifted: TrainEpisode[] = local.map((e, i) => ({
      ...e,
      inputs: {
        ...e.inputs,
        old_logprobs: Float32Array.from(e.inputs.old_logprobs, (v, t) => {
          if (weights[i][t] === 0) return v;
          const d = DELTAS[n++ % DELTAS.length];
          deltas.push(d);
          return old[i][t] - d;
        }),
      },
    }));
    const expectedDiff = deltas.reduce((a, d) => a + Math.abs(d), 0) / deltas.length;
    const expectedKl = deltas.reduce((a, d) => a + Math.exp(d) - 1 - d, 0) / deltas.length;
    // Each trained token's ρ in float64: its own (token level) or its episode's exp(Σ δ) (sequence level).
    const rhos = (level: "token" | "sequence") => {
      let k = 0;
      return weights.map((ws) => {
        const own = Array.from(ws, (w) => (w === 0 ? NaN : deltas[k++]));
        const sum = own.reduce((a, d) => (Number.isNaN(d) ? a : a + d), 0);
        return own.map((d) => (Number.isNaN(d) ? NaN : Math.exp(level === "sequence" ? sum : d)));
      });
    };
    for (const [level, cap] of [["token", 2], ["sequence", 10]] as const) {
      const rho = rhos(level);
      const trained = rho.flat().filter((r) => !Number.isNaN(r));
      const expectedClip = trained.filter((r) => r > cap).length / trained.length;
      assert.ok(expectedClip > 0 && expectedClip < 1, `${level}: some ratios above the cap, some below`);
      for (const mode of ["truncate", "mask"] as const) {
        const params = copy(adapter.weights);
        const [m] = await trainOnBatch(
          trainer,
          shifted,
          params,
          initOptimizerState("sgd", params),
          settings({ mode, level, cap }),
        );
        const label = `${mode} ${level}`;
        assert.ok(Math.abs(m.rolloutIs!.rollout_logprob_diff - expectedDiff) < 1e-5, `${label} |Δ|`);
        assert.ok(Math.abs(m.rolloutIs!.rollout_kl - expectedKl) < 1e-5, `${label} KL`);
        assert.ok(Math.abs(m.rolloutIs!.rollout_is_clip_frac - expectedClip) < 1e-9, `${label} clipped`);
        // First pass: the PPO ratio is exp(lp − old_trainer) = 1, so pg = −Σ weight · w(ρ) · A.
        let expected = 0;
        shifted.forEach((e, i) =>
          weights[i].forEach((w, t) => {
            if (w === 0) return;
            const r = rho[i][t];
            const is = mode === "truncate" ? Math.min(r, cap) : r > cap ? 0 : r;
            expected -= w * is * e.inputs.advantages[t];
          })
        );
        assert.ok(
          Math.abs(m.pg_loss - expected) < 1e-5 * Math.abs(expected),
          `${label} pg ${m.pg_loss} vs ${expected}`,
        );
        assert.equal(m.clip_frac, 0, "no PPO clipping at ratio 1");
      }
    }
  });
});
