/**
 * Acceptance 2 of issue 30: a new loss is one file (tests/train/toy_loss.ts) plus one registration line
 * (below), and the config check, the batch reader, the train graph and the trainer's feeds pick it up with
 * no edit elsewhere: its name is a choice of `train.loss.objective`, its scalar a checked `train.loss` key
 * with its default, its rule runs at load, its input column is read from a batch file, and the train
 * graph's loss and LoRA gradient are its formula's (float64 reference model, central finite differences).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/mod.ts";
import { validateConfig } from "../../lib/config/mod.ts";
import { generateArithmeticTasks } from "../../lib/data/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { registerPolicyLoss } from "../../lib/losses/registry.ts";
import { openModelDir } from "../../lib/model/model_dir.ts";
import { type Adapter, type LoraSpec, loraTensorSpecs } from "../../lib/model/lora.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { trainScalarsOf } from "../../lib/pipeline/train.ts";
import { algorithmOf, tokenInputsOf } from "../../lib/train/algorithm.ts";
import { aggregationWeights, planMicroBatches, type TrainEpisode } from "../../lib/train/batch.ts";
import { writeDemonstrationBatch } from "../../lib/train/demonstrations.ts";
import { episodesOf } from "../../lib/train/episodes.ts";
import { accumulate } from "../../lib/train/passes.ts";
import { Trainer } from "../../lib/train/trainer.ts";
import { randomAdapter, referenceLoraOf } from "../helpers/adapters.ts";
import { readReferenceWeights } from "../helpers/reference_model.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { Qwen3Reference } from "../reference/qwen3_f64.ts";
import { mulberry32 } from "../reference/weights.ts";
import { TOY } from "./toy_loss.ts";

registerPolicyLoss(TOY); // the one registration line

const VOCAB = 512;
const SPEC: LoraSpec = { r: 2, alpha: 4, rslora: false, targets: ["q", "v", "up"] };

function refused(body: () => unknown, ...fragments: string[]): void {
  assert.throws(body, (e: unknown) => {
    assert.ok(e instanceof UserError, `a UserError, got ${e}`);
    for (const f of fragments) assert.ok(e.message.includes(f), `"${f}" in: ${e.message}`);
    return true;
  });
}

Deno.test("the config check picks up a registered loss: its name, its scalar's range and default, its rule", () => {
  const config = validateConfig({ train: { loss: { objective: "toy" } } });
  assert.equal(config.train.loss.objective, "toy");
  assert.equal((config.train.loss as unknown as Record<string, number>).toy_scale, 1, "the declared default");
  const set = validateConfig({ train: { loss: { objective: "toy", toy_scale: 0.5 } } });
  assert.equal(trainScalarsOf(set).loss?.toy_scale, 0.5, "the trainer is fed the configured value");
  refused(
    () => validateConfig({ train: { loss: { objective: "toy", toy_scale: 3 } } }),
    "train.loss.toy_scale",
  );
  refused(
    () => validateConfig({ train: { loss: { objective: "toy" }, num_iterations: 2 } }),
    "toy is on-policy",
  );
  refused(
    () => validateConfig({ mask: { estimator: "gae" }, train: { loss: { objective: "toy" } } }),
    "train.loss.objective",
    "toy trains none",
  );
  refused(() => validateConfig({ train: { loss: { objective: "toys" } } }), "train.loss.objective", "toy");
});

Deno.test("the batch reader reads a registered loss's declared column under its input name", async () => {
  const model = await makeTinyModel();
  const tokenizer = await loadTokenizer(model);
  const tasks = generateArithmeticTasks({
    numTasks: 2,
    seed: 1,
    minOperands: 2,
    maxOperands: 2,
    maxValue: 9,
  });
  const path = join(await Deno.makeTempDir(), "batch.arrow");
  const demos = tasks.map((task) => ({ task, response: `Final answer: ${task.answer}` }));
  await writeDemonstrationBatch(path, demos, tokenizer, {
    systemPrompt: "",
    enableThinking: false,
    configHash: "h",
    model,
  });
  const batch = await readStageFile(path, "batch");
  const inputs = tokenInputsOf(algorithmOf(validateConfig({ train: { loss: { objective: "toy" } } })));
  assert.deepEqual(inputs.map((i) => i.name), ["toy_weight"]);
  const episodes = episodesOf(batch, { inputs });
  episodes.forEach((e, i) => {
    assert.deepEqual(Object.keys(e.inputs), ["toy_weight"]);
    assert.deepEqual(
      Array.from(e.inputs.toy_weight),
      Array.from(batch.listAt<Float32Array>("advantages", i)),
    );
  });
});

Deno.test("the train graph of a registered loss computes its formula: loss and LoRA gradient (finite differences)", async () => {
  const dir = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 11, kvHeads: 2 });
  const model = await openModelDir(dir);
  const base = await readReferenceWeights(dir);
  const adapter = randomAdapter(model.config, SPEC, 21, 0.2);
  const config = validateConfig({ train: { loss: { objective: "toy", toy_scale: 0.5 } } });
  const scalars = { ...trainScalarsOf(config), temperature: 0.9 };
  const rand = mulberry32(3);
  const episodes: TrainEpisode[] = [7, 12].map((n) => {
    const tokens = Array.from({ length: n }, () => Math.floor(rand() * VOCAB));
    return {
      tokens,
      lossMask: tokens.map((_, t) => (t >= 2 ? 1 : 0)),
      inputs: { toy_weight: tokens.map(() => rand() * 2 - 1) },
    };
  });
  const weights = aggregationWeights(episodes, "token_mean", 24);
  const lossAt = (key?: string, direction?: Float64Array, delta = 0) => {
    const tensors = new Map([...adapter.weights].map(([k, v]) => [k, Float64Array.from(v)]));
    if (key) tensors.get(key)!.forEach((v, i, a) => (a[i] = v + delta * direction![i]));
    const lora = referenceLoraOf(base.config, { spec: SPEC, weights: tensors } as unknown as Adapter);
    const reference = new Qwen3Reference(base.config, base.weights, lora);
    return episodes.reduce((sum, e, i) => {
      const lp = reference.logprobs(e.tokens as number[], 0.9);
      return sum +
        lp.reduce(
          (s, v, t) => (weights[i][t] ? s + weights[i][t] * -0.5 * e.inputs.toy_weight[t] * v : s),
          0,
        );
    }, 0);
  };
  const trainer = await Trainer.create(model, { ...algorithmOf(config), lora: SPEC });
  try {
    const sums = await accumulate(
      trainer,
      planMicroBatches(episodes, weights, 64, trainer.maxChunk),
      adapter.weights,
      scalars,
    );
    const expected = lossAt();
    assert.ok(
      Math.abs(sums.loss - expected) <= 1e-5 * Math.abs(expected) + 1e-7,
      `loss ${sums.loss} vs ${expected}`,
    );
    const directions = mulberry32(5);
    for (const t of loraTensorSpecs(model.config, SPEC)) {
      const direction = Float64Array.from({ length: t.dims[0] * t.dims[1] }, () => directions() * 2 - 1);
      const fd = (lossAt(t.key, direction, 1e-5) - lossAt(t.key, direction, -1e-5)) / 2e-5;
      const analytic = sums.grads.get(t.key)!.reduce((acc, v, i) => acc + v * direction[i], 0);
      assert.ok(
        Math.abs(analytic - fd) <= 1e-3 * Math.abs(fd) + 1e-6,
        `${t.key}: graph ${analytic}, fd ${fd}`,
      );
    }
  } finally {
    await trainer.close();
  }
});
