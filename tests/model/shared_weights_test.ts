/**
 * One float32 copy of the weights per process (lib/model/shared_weights.ts): loading converts the
 * checkpoint exactly and stacks each Linear group; an inference engine and a trainer built over the
 * shared weights give the log-probs and gradients of today's sessions that fold their own copies; and
 * both really compute on the shared memory (a weight changed there changes both sessions' outputs, in
 * this thread and in the policy's Worker), so neither holds a copy of its own.
 *
 * Tiny random models with a 512-token vocabulary (no tokenizer), in bf16, f16 and f32.
 */

import assert from "node:assert/strict";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { loadPolicy } from "../../lib/engine/worker_policy.ts";
import { buildTrainModel } from "../../lib/train/train_graph.ts";
import type { LoraSpec } from "../../lib/model/lora.ts";
import { linearPath, type ModelDir, openModelDir } from "../../lib/model/model_dir.ts";
import {
  headNormsName,
  loadLinearStacks,
  loadSharedWeights,
  sharedTensorData,
  type SharedWeights,
  stackedWeightName,
} from "../../lib/model/shared_weights.ts";
import { readTensor } from "../../lib/safetensors/read.ts";
import { aggregationWeights, planMicroBatches, type TrainEpisode } from "../../lib/train/batch.ts";
import { type MicroResult, Trainer } from "../../lib/train/trainer.ts";
import { UserError } from "../../lib/errors.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { randomAdapter } from "../helpers/adapters.ts";
import { mulberry32 } from "../reference/weights.ts";

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "k", "v", "o", "gate", "up", "down"] };
const SCALARS = { temperature: 0.9, epsLow: 0.2, epsHigh: 0.28, beta: 0 };

async function model(dtype: "bfloat16" | "float16" | "float32" = "bfloat16"): Promise<ModelDir> {
  return await openModelDir(await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 5, dtype }));
}

function sequences(seed: number): number[][] {
  const rand = mulberry32(seed);
  return [9, 14].map((n) => Array.from({ length: n }, () => Math.floor(rand() * VOCAB)));
}

function trainBatch(seqs: number[][], maxChunk: number) {
  const rand = mulberry32(3);
  const episodes: TrainEpisode[] = seqs.map((tokens, i) => ({
    tokens,
    lossMask: tokens.map((_, t) => (t >= 2 ? 1 : 0)),
    inputs: {
      advantages: tokens.map(() => (i % 2 ? -1 : 1)),
      old_logprobs: tokens.map((_, t) => (t === 0 ? 0 : -6 - rand())),
    },
  }));
  const weights = aggregationWeights(episodes, "token_mean", 16);
  const [mb] = planMicroBatches(episodes, weights, 4096, maxChunk);
  return mb;
}

/** Log-probs of the policy and one micro-batch's train outputs, with a nonzero adapter. */
async function outputs(m: ModelDir, sharedWeights?: SharedWeights) {
  const adapter = randomAdapter(m.config, SPEC, 7);
  const policy = await LocalPolicy.load(m.dir, { adapter, sharedWeights });
  const trainer = await Trainer.create(m, { lora: SPEC, objective: "clipped", withReference: false }, {
    sharedWeights,
  });
  try {
    return {
      logprobs: await policy.logprobs(sequences(1)),
      train: await trainer.run(trainBatch(sequences(1), trainer.maxChunk), adapter.weights, SCALARS),
      backend: trainer.backend,
    };
  } finally {
    await trainer.close();
    await policy.close();
  }
}

function assertClose(actual: ArrayLike<number>, expected: ArrayLike<number>, tol: number, what: string) {
  assert.equal(actual.length, expected.length, `${what}: length`);
  for (let i = 0; i < actual.length; i++) {
    if (Number.isNaN(expected[i]) && Number.isNaN(actual[i])) continue; // a sequence's first token
    const bound = tol * (1 + Math.abs(expected[i]));
    assert.ok(Math.abs(actual[i] - expected[i]) <= bound, `${what}[${i}]: ${actual[i]} vs ${expected[i]}`);
  }
}

function assertSameTrain(a: MicroResult, b: MicroResult, tol: number) {
  assertClose([a.loss], [b.loss], tol, "loss");
  assertClose(a.logprobs, b.logprobs, tol, "train logprobs");
  for (const [key, g] of b.grads) assertClose(a.grads.get(key)!, g, tol, key);
}

Deno.test("shared weights hold every checkpoint tensor as float32, each Linear group stacked in order", async () => {
  for (const dtype of ["bfloat16", "float16", "float32"] as const) {
    const m = await model(dtype);
    const shared = await loadSharedWeights(m);
    const file = m.checkpoint.files[0];
    const read = async (name: string) =>
      (await readTensor(file, name, { asFloat32: true })).data as Float32Array;
    const byName = new Map(shared.tensors.map((t) => [t.name, t]));
    const stacked = sharedTensorData(
      shared,
      byName.get(stackedWeightName(1, ["q_proj", "k_proj", "v_proj"]))!,
    );
    const parts = await Promise.all(
      (["q_proj", "k_proj", "v_proj"] as const).map((l) => read(`${linearPath(1, l)}.weight`)),
    );
    assert.deepEqual(Array.from(stacked), parts.flatMap((p) => Array.from(p)), `${dtype}: q/k/v stacked`);
    const embedding = sharedTensorData(shared, byName.get("model.embed_tokens.weight")!);
    assert.deepEqual(Array.from(embedding), Array.from(await read("model.embed_tokens.weight")), dtype);
    assert.ok(shared.tensors.every((t) => t.offset % 64 === 0), "aligned");
    // The head norms: q_norm's weight times the attention's 1/sqrt(D) per query head, then k_norm's.
    const { num_attention_heads: nH, num_key_value_heads: nKV, head_dim: D } = m.config;
    const heads = sharedTensorData(shared, byName.get(headNormsName(1))!);
    const [q, k] = [
      await read("model.layers.1.self_attn.q_norm.weight"),
      await read("model.layers.1.self_attn.k_norm.weight"),
    ];
    const expected = [
      ...Array.from({ length: nH }, () => Array.from(q, (v) => Math.fround(v * (1 / Math.sqrt(D))))),
      ...Array.from({ length: nKV }, () => Array.from(k)),
    ].flat();
    assert.deepEqual(Array.from(heads), expected, `${dtype}: head norms`);
  }
});

Deno.test("loadLinearStacks holds every Linear stack of the shared weights and nothing else", async () => {
  const m = await model("bfloat16");
  const [stacks, shared] = [await loadLinearStacks(m), await loadSharedWeights(m)];
  assert.equal(stacks.tensors.length, 4 * m.config.num_hidden_layers, "four groups per layer");
  for (const t of stacks.tensors) {
    const whole = shared.tensors.find((s) => s.name === t.name)!;
    assert.deepEqual(whole.dims, t.dims, t.name);
    assert.deepEqual(sharedTensorData(stacks, t), sharedTensorData(shared, whole), t.name);
  }
});

Deno.test("sessions over shared weights give the folded sessions' log-probs, loss and gradients", async () => {
  for (const dtype of ["bfloat16", "float16"] as const) {
    const m = await model(dtype);
    const folded = await outputs(m);
    const shared = await outputs(m, await loadSharedWeights(m));
    assert.equal(shared.backend, "ffi");
    // Same values; only the GEMM's summation order may differ (no prepacked weights): ≤ 1e-5 here.
    shared.logprobs.forEach((lp, i) => assertClose(lp, folded.logprobs[i], 1e-5, `${dtype} logprobs ${i}`));
    assertSameTrain(shared.train, folded.train, 1e-5);
  }
});

Deno.test("both sessions compute on the shared memory: a weight changed there changes both, in a Worker too", async () => {
  const m = await model();
  const shared = await loadSharedWeights(m);
  const adapter = randomAdapter(m.config, SPEC, 7);
  const local = await LocalPolicy.load(m.dir, { adapter, sharedWeights: shared });
  const worker = await loadPolicy(m.dir, { adapter, sharedWeights: shared });
  const trainer = await Trainer.create(m, { lora: SPEC, objective: "clipped", withReference: false }, {
    sharedWeights: shared,
  });
  const seqs = sequences(2);
  const batch = trainBatch(seqs, trainer.maxChunk);
  const run = async () => ({
    local: (await local.logprobs(seqs))[1],
    worker: (await worker.logprobs(seqs))[1],
    train: (await trainer.run(batch, adapter.weights, SCALARS)).logprobs,
  });
  try {
    const before = await run();
    // A Linear stack (read by Gemm, which would prepack a copy of its own) and the embedding (Gather).
    for (const name of [stackedWeightName(0, ["gate_proj", "up_proj"]), "model.embed_tokens.weight"]) {
      const data = sharedTensorData(shared, shared.tensors.find((t) => t.name === name)!);
      const saved = data.slice();
      data.forEach((v, i) => (data[i] = v * 1.5 + 0.01));
      const changed = await run();
      data.set(saved);
      for (const session of ["local", "worker", "train"] as const) {
        assert.notDeepEqual(Array.from(changed[session]), Array.from(before[session]), `${name}: ${session}`);
      }
      assert.deepEqual(await run(), before, `${name}: restoring the memory restores the outputs`);
    }
  } finally {
    await trainer.close();
    await worker.close();
    await local.close();
  }
});

Deno.test("shared weights of another model are refused before a graph is built", async () => {
  const a = await model("bfloat16");
  const b = await model("float32");
  const shared = await loadSharedWeights(a);
  assert.throws(
    () => buildTrainModel(b, { lora: SPEC, objective: "clipped", withReference: false }, shared),
    (e: unknown) => e instanceof UserError && /loaded for another model/.test((e as Error).message),
  );
});
