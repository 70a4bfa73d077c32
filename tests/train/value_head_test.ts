/**
 * PPO's train graph (clipped policy loss + vf_coef × value loss, value_head.ts) against this file's own
 * float64 code: the value head and both value losses (squared, and clipped at ±c around the rollout's
 * values) written from the formulas, over the float64 reference Qwen3's final hidden states. Checked:
 * the graph's loss and values equal the float64 ones; the value head's gradients and the LoRA gradients
 * (which the value loss reaches through the shared hidden states) equal central finite differences of
 * the float64 loss along random directions.
 *
 * Tolerances as tests/train_test.ts: float32 sums against float64 differences, 1e-3 relative + 1e-6.
 */

import assert from "node:assert/strict";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { type Adapter, type LoraSpec, loraTensorSpecs } from "../../lib/model/lora.ts";
import { aggregationWeights, planMicroBatches, type TrainEpisode, unshift } from "../../lib/train/batch.ts";
import { accumulate } from "../../lib/train/step.ts";
import { type LossScalars, Trainer } from "../../lib/train/trainer.ts";
import { initValueHead, valueHeadSpecs } from "../../lib/train/value_head.ts";
import type { Tensors } from "../../lib/train/optimizer.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { randomAdapter, referenceLoraOf } from "../helpers/adapters.ts";
import { readReferenceWeights } from "../helpers/reference_model.ts";
import { objective } from "../reference/objective.ts";
import { Qwen3Reference } from "../reference/qwen3_f64.ts";
import { mulberry32 } from "../reference/weights.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "v", "up", "down"] };
const SCALARS: LossScalars = {
  temperature: 0.9,
  epsLow: 0.2,
  epsHigh: 0.28,
  beta: 0,
  vfCoef: 0.7,
  valueClip: 0.05,
};

type Base = Awaited<ReturnType<typeof readReferenceWeights>>;

/** The float64 value head of seed 002 on one hidden row. */
function valueOf(head: Map<string, Float64Array>, h: Float64Array, at: number, H: number): number {
  const w1 = head.get("value_head.0.weight")!, b1 = head.get("value_head.0.bias")!;
  const w2 = head.get("value_head.2.weight")!, b2 = head.get("value_head.2.bias")!;
  let v = b2[0];
  for (let j = 0; j < H / 2; j++) {
    let z = b1[j];
    for (let k = 0; k < H; k++) z += w1[j * H + k] * h[at * H + k];
    v += w2[j] * Math.max(z, 0);
  }
  return v;
}

/** Per-token value loss of V against return R, with the rollout's value `old` (clipped variant: ±c). */
function valueLoss(v: number, r: number, old: number, clipped: boolean): number {
  const plain = (v - r) ** 2;
  if (!clipped) return plain;
  const c = SCALARS.valueClip!;
  const moved = old + Math.min(Math.max(v - old, -c), c);
  return Math.max(plain, (moved - r) ** 2);
}

interface Params {
  lora: Map<string, Float64Array>;
  head: Map<string, Float64Array>;
}

/** The whole float64 loss: policy (token_mean) + vf_coef × Σ_t m_t / Σ m · lv_t; and the values. */
function referenceLoss(base: Base, spec: LoraSpec, p: Params, eps: TrainEpisode[], clipped: boolean) {
  const lora = referenceLoraOf(base.config, { spec, weights: p.lora } as unknown as Adapter);
  const model = new Qwen3Reference(base.config, base.weights, lora);
  const H = base.config.hidden_size;
  let masked = 0, vSum = 0;
  const values: number[][] = [];
  const policy = eps.map((e) => {
    const tokens = [...e.tokens as number[]];
    const h = model.hidden(tokens);
    const v = tokens.map((_, t) => (t === 0 ? NaN : valueOf(p.head, h, t - 1, H)));
    values.push(v);
    for (let t = 1; t < tokens.length; t++) {
      if (!e.lossMask[t]) continue;
      masked++;
      vSum += valueLoss(v[t], e.inputs.returns[t], e.inputs.old_values[t], clipped);
    }
    return {
      logprobs: model.logprobs(tokens, SCALARS.temperature),
      old: e.inputs.old_logprobs,
      advantages: e.inputs.advantages,
      mask: e.lossMask,
    };
  });
  const pg = objective(policy, {
    aggregation: "token_mean",
    epsLow: 0.2,
    epsHigh: 0.28,
    beta: 0,
    maxResponseTokens: 1,
  });
  return { loss: pg + SCALARS.vfCoef! * vSum / masked, values };
}

/** Episodes with ratios spread around 1, returns and rollout values near the head's values. */
function episodes(base: Base, p: Params, lengths: number[]): TrainEpisode[] {
  const rand = mulberry32(17);
  return lengths.map((n, i) => {
    const tokens = Array.from({ length: n }, () => Math.floor(rand() * VOCAB));
    const model = new Qwen3Reference(
      base.config,
      base.weights,
      referenceLoraOf(base.config, { spec: SPEC, weights: p.lora } as unknown as Adapter),
    );
    const lp = model.logprobs(tokens, SCALARS.temperature);
    const h = model.hidden(tokens);
    const v = tokens.map((_, t) => (t === 0 ? 0 : valueOf(p.head, h, t - 1, base.config.hidden_size)));
    return {
      tokens,
      lossMask: tokens.map((_, t) => (t >= 2 + i ? 1 : 0)),
      inputs: {
        old_logprobs: tokens.map((_, t) => (t === 0 ? 0 : lp[t] + (rand() - 0.5) * 0.8)),
        advantages: tokens.map(() => (i % 2 ? -1 : 1) * (0.5 + rand())),
        returns: tokens.map(() => rand() * 2 - 1),
        // Rollout values ±0.1 around V: with c = 0.05 some tokens clip and some do not.
        old_values: v.map((x) => x + (rand() - 0.5) * 0.2),
      },
    };
  });
}

const f64 = (t: Tensors) => new Map([...t].map(([k, v]) => [k, Float64Array.from(v)]));

for (const clipped of [false, true]) {
  Deno.test(`PPO loss, values, value-head and LoRA gradients equal float64 code (${clipped ? "clipped" : "squared"} value loss)`, async () => {
    const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11 });
    const model = await openModelDir(dir);
    const base = await readReferenceWeights(dir);
    const adapter = randomAdapter(model.config, SPEC, 21, 0.2);
    const head = initValueHead(model.config.hidden_size, 3);
    const p: Params = { lora: f64(adapter.weights), head: f64(head) };
    const eps = episodes(base, p, [9, 14, 6]);
    const trainer = await Trainer.create(model, {
      lora: SPEC,
      objective: "clipped",
      withReference: false,
      valueLoss: clipped ? "clipped" : "squared",
    });
    try {
      const weights = aggregationWeights(eps, "token_mean", 1);
      const mbs = planMicroBatches(eps, weights, 64, trainer.maxChunk);
      assert.ok(mbs.length > 1, "several micro-batches");
      const sums = await accumulate(trainer, mbs, adapter.weights, SCALARS, head);
      const want = referenceLoss(base, SPEC, p, eps, clipped);
      assert.ok(
        Math.abs(sums.loss - want.loss) <= 1e-5 * Math.abs(want.loss),
        `loss ${sums.loss} vs ${want.loss}`,
      );
      for (const mb of mbs) {
        const out = await trainer.run(mb, adapter.weights, SCALARS, { valueHead: head });
        mb.episodes.forEach((e, row) => {
          const got = unshift(out.value!.values, mb, row, eps[e].tokens.length);
          got.forEach((v, t) =>
            Number.isNaN(v) || assert.ok(Math.abs(v - want.values[e][t]) < 1e-5, `V[${e}][${t}]`)
          );
        });
      }
      if (clipped) {
        const moved = eps.flatMap((e, i) =>
          want.values[i].map((v, t) => e.lossMask[t] && Math.abs(v - e.inputs.old_values[t]) > 0.05)
        );
        assert.ok(moved.some(Boolean) && !moved.every(Boolean), "some values clipped, some not");
      }
      const rand = mulberry32(5);
      const check = (name: string, key: string, which: "head" | "lora", g: Float32Array) => {
        const dirv = Float64Array.from(g, () => rand() * 2 - 1);
        const h = 1e-5;
        const at = (delta: number) => {
          const q: Params = { lora: new Map(p.lora), head: new Map(p.head) };
          q[which].set(key, p[which].get(key)!.map((x, i) => x + delta * dirv[i]));
          return referenceLoss(base, SPEC, q, eps, clipped).loss;
        };
        const fd = (at(h) - at(-h)) / (2 * h);
        const analytic = g.reduce((a, v, i) => a + v * dirv[i], 0);
        assert.ok(
          Math.abs(analytic - fd) <= 1e-3 * Math.abs(fd) + 1e-6,
          `${name} ${key}: graph ${analytic}, fd ${fd}`,
        );
      };
      for (const t of valueHeadSpecs(model.config.hidden_size)) {
        check("value head", t.key, "head", sums.valueGrads!.get(t.key)!);
      }
      for (const t of loraTensorSpecs(model.config, SPEC).filter((t) => t.layer === 1)) {
        check("LoRA", t.key, "lora", sums.grads.get(t.key)!);
      }
    } finally {
      await trainer.close();
    }
  });
}
