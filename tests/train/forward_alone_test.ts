/**
 * `Trainer.forward` and `logprobs`: the passes that read no gradient (the KL reference, the trainer-side
 * old log-probs of the sampler–trainer correction, GSPO's sequence ratio, PPO's values pass) run the train
 * graph's forward alone where the weights are shared on the CPU and on WebGPU (`model.webgpu.forward_session`),
 * and must give `run`'s log-probs and values bit for bit: on policy every ratio is then exactly 1
 * (docs/RELIABILITY.md 194, 197, 200). On the CPU, whose head is a Loop that runs whole, the forward's head
 * is a Loop of its own that computes the log-probs only.
 */

import assert from "node:assert/strict";
import type { ComputeDtype } from "../../lib/model/graph/forms.ts";
import type { LoraSpec } from "../../lib/model/lora.ts";
import type { ModelDir } from "../../lib/model/model_dir.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { loadSharedWeights } from "../../lib/model/shared_weights.ts";
import type { AlgorithmSpec } from "../../lib/train/algorithm.ts";
import { aggregationWeights, planMicroBatches, type TrainEpisode } from "../../lib/train/batch.ts";
import { Trainer, type TrainerOptions } from "../../lib/train/trainer.ts";
import { TrainSession } from "../../lib/train/train_session.ts";
import { validateConfig } from "../../lib/config/mod.ts";
import { freshValueState } from "../../lib/train/value_checkpoint.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { webgpuTest } from "../helpers/webgpu.ts";
import { profiled } from "../../lib/engine/profiled.ts";
import { busiestRuns } from "../../lib/ort/profile.ts";

const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
const SCALARS = { temperature: 0.7, epsLow: 0.2, epsHigh: 0.28, beta: 0.05, vfCoef: 0.5, valueClip: 0.2 };

/** Ragged episodes with masked prompts, every per-token input a graph of these algorithms may declare. */
function episodes(): TrainEpisode[] {
  return [40, 17, 90, 5].map((n, i) => {
    const zeros = Array(n).fill(0);
    return {
      tokens: Array.from({ length: n }, (_, j) => (j * 7 + i * 13) % 500),
      lossMask: Array.from({ length: n }, (_, j) => (j >= 4 ? 1 : 0)),
      inputs: {
        old_logprobs: Array(n).fill(-6.2),
        ref_logprobs: Array(n).fill(-6),
        advantages: Array(n).fill(i % 2 ? -1 : 1),
        seq_log_ratio: zeros,
        returns: zeros,
        old_values: zeros,
      },
    };
  });
}

const ALGORITHMS: Record<string, AlgorithmSpec> = {
  "clipped with a KL reference": { objective: "clipped", withReference: true },
  gspo: { objective: "gspo", withReference: false },
  "clipped with a value head (PPO)": { objective: "clipped", withReference: false, valueLoss: "squared" },
};

/**
 * Every micro-batch of `episodes()` run whole and alone, with the adapter at its scale and at 0, for each
 * algorithm: the forward alone's log-probs and values must be the whole run's, bit for bit.
 */
async function assertForwardAloneExact(
  model: ModelDir,
  algorithms: Record<string, AlgorithmSpec>,
  options: TrainerOptions,
  graph: { ep?: "cpu" | "webgpu"; compute?: ComputeDtype } = {},
): Promise<void> {
  const adapter = randomAdapter(model.config, SPEC, 5);
  const valueHead = freshValueState(model.config.hidden_size, 3, "adamw").weights;
  for (const [name, algorithm] of Object.entries(algorithms)) {
    const trainer = await Trainer.create(model, { lora: SPEC, ...algorithm, ...graph }, options);
    try {
      assert.ok(trainer.forwardAlone, `${name}: the trainer runs the forward alone`);
      const batch = episodes().map((e) => ({
        ...e,
        inputs: Object.fromEntries(trainer.tokenInputs.map((i) => [i.name, e.inputs[i.name]])),
      }));
      const weights = aggregationWeights(batch, "token_mean", 128);
      let rows = 0;
      for (const mb of planMicroBatches(batch, weights, 64, trainer.maxChunk)) {
        for (const scale of [undefined, 0]) {
          const whole = await trainer.run(mb, adapter.weights, SCALARS, { scale, valueHead });
          const alone = await trainer.forward(mb, adapter.weights, SCALARS, { scale, valueHead });
          const bits = (x: Float32Array) => new Uint32Array(x.buffer);
          assert.deepEqual(bits(alone.logprobs), bits(whole.logprobs), `${name}, scale ${scale}`);
          assert.deepEqual(
            await trainer.logprobs(mb, adapter.weights, SCALARS, { scale, valueHead }),
            alone.logprobs,
          );
          if (whole.value) assert.deepEqual(bits(alone.values!), bits(whole.value.values), `${name}: values`);
          else assert.equal(alone.values, undefined);
          rows += alone.logprobs.length;
        }
      }
      assert.ok(rows > 300, `${name}: ${rows} log-probs compared`);
    } finally {
      await trainer.close();
    }
  }
}

Deno.test("on the CPU over shared weights, the forward alone gives the train run's log-probs and values bit for bit", async () => {
  const model = await openModelDir(
    await makeTinyModel({ layers: 3, vocab: 512, tokenizer: false, seed: 11 }),
  );
  await assertForwardAloneExact(model, ALGORITHMS, { sharedWeights: await loadSharedWeights(model) });
});

Deno.test("on the CPU the forward alone runs none of the head's gradient: its chunks compute the log-probs only", async () => {
  const model = await openModelDir(await makeTinyModel({ vocab: 512, tokenizer: false, seed: 11 }));
  const options = { sharedWeights: await loadSharedWeights(model) };
  const batch = episodes().map((e) => ({
    ...e,
    inputs: { old_logprobs: e.inputs.old_logprobs, advantages: e.inputs.advantages },
  }));
  const [mb] = planMicroBatches(batch, aggregationWeights(batch, "token_mean", 128), 4096, 32);
  const adapter = randomAdapter(model.config, SPEC, 5);
  const traces = await profiled(async () => {
    const trainer = await Trainer.create(
      model,
      { lora: SPEC, objective: "clipped", withReference: false },
      options,
    );
    try {
      assert.ok(trainer.forwardAlone);
      for (let i = 0; i < 2; i++) await trainer.logprobs(mb, adapter.weights, SCALARS);
    } finally {
      await trainer.close();
    }
  });
  const nodes = busiestRuns(traces).at(-1)!.nodes;
  // The head's gradient multiplies [C, vocab] by the head matrix; nothing else takes a vocab-wide operand.
  const width = (t: Record<string, number[]> | undefined) => t && Object.values(t)[0]?.at(-1);
  const logits = nodes.filter((n) => n.op === "Gemm" && width(n.outputs[0]) === 512);
  const vocabWide = nodes.filter((n) => n.op === "Gemm" && width(n.inputs[0]) === 512);
  assert.ok(logits.length >= 2, `the head ran in chunks: ${logits.length} logit products`);
  assert.equal(vocabWide.length, 0, `${vocabWide.length} products of the head's gradient ran`);
});

/** A clipped trainer that runs the whole graph for log-probs gives one micro-batch's `run` log-probs. */
async function assertLogprobsOfWholeRun(trainer: Trainer, model: ModelDir): Promise<void> {
  assert.equal(trainer.forwardAlone, false);
  const batch = episodes().map((e) => ({
    ...e,
    inputs: { old_logprobs: e.inputs.old_logprobs, advantages: e.inputs.advantages },
  }));
  const [mb] = planMicroBatches(
    batch,
    aggregationWeights(batch, "token_mean", 128),
    4096,
    trainer.maxChunk,
  );
  const adapter = randomAdapter(model.config, SPEC, 5);
  const whole = (await trainer.run(mb, adapter.weights, SCALARS)).logprobs;
  assert.deepEqual(await trainer.logprobs(mb, adapter.weights, SCALARS), whole);
}

for (const compute of ["float32", "float16"] as const) {
  webgpuTest(
    `on WebGPU (${compute}) the forward alone gives the train run's log-probs and values bit for bit`,
    async () => {
      // With onnxruntime's default optimizers 58 of 192 float32 log-probs differed here in their last bits
      // (trainer.ts FORWARD_ALONE_FUSIONS): the sessions must leave the same fusions out.
      const model = await openModelDir(
        await makeTinyModel({ layers: 3, vocab: 512, tokenizer: false, seed: 11 }),
      );
      await assertForwardAloneExact(model, ALGORITHMS, {}, { ep: "webgpu", compute });
    },
  );
}

webgpuTest(
  "on WebGPU with model.webgpu.forward_session false the trainer runs the whole graph for log-probs",
  async () => {
    const dir = await makeTinyModel({ vocab: 512, tokenizer: false, seed: 11 });
    const lora = { r: SPEC.r, alpha: SPEC.alpha };
    for (const forward_session of [true, false]) {
      const config = validateConfig({
        model: { path: dir, ep: "webgpu", webgpu: { forward_session } },
        train: { lora },
      });
      const session = await TrainSession.open(config, null);
      try {
        assert.equal(session.trainer.forwardAlone, forward_session, `forward_session ${forward_session}`);
      } finally {
        await session.close();
      }
    }
    const model = await openModelDir(dir);
    const spec = { lora: SPEC, objective: "clipped", withReference: false, ep: "webgpu" } as const;
    const trainer = await Trainer.create(model, spec, { forwardSession: false });
    try {
      await assertLogprobsOfWholeRun(trainer, model);
    } finally {
      await trainer.close();
    }
  },
);

Deno.test("without shared weights the trainer runs the whole graph for log-probs (no second copy of the weights)", async () => {
  const model = await openModelDir(await makeTinyModel({ vocab: 512, tokenizer: false, seed: 11 }));
  const trainer = await Trainer.create(model, { lora: SPEC, objective: "clipped", withReference: false });
  try {
    await assertLogprobsOfWholeRun(trainer, model);
  } finally {
    await trainer.close();
  }
});
