/**
 * `TrainSession`: what training keeps open for a whole run — the model directory, the train graph and
 * its onnxruntime session (built once: seconds for a large model, docs/ENGINE_FACTS.md), and the adapter
 * being trained with its optimizer state (and, for PPO, the value head with its own), in memory. A train step updates the adapter in place; the
 * next step continues from it without reading the checkpoint back (the checkpoint holds the same
 * float32 tensors, so continuing from memory equals continuing from the file, bit for bit).
 *
 * `checkTrainStart` reads only small JSON files, so commands call it before any model loads: an
 * adapter to continue must have `train.lora`'s shape and come from the same base model.
 *
 * @module
 */

import { join } from "node:path";
import type { Config, ModelConfig, TrainConfig } from "../config/schema.ts";
import { providerOptionsOf } from "../config/sections/model.ts";
import { UserError } from "../errors.ts";
import { sha256Hex } from "../fs/sha256.ts";
import { type Adapter, initLoraWeights, type LoraSpec, type LoraWeights } from "../model/lora.ts";
import { type ModelDir, openModelDir } from "../model/model_dir.ts";
import { ADAPTER_CONFIG, parseAdapterConfig, readPeftAdapter } from "../model/peft.ts";
import type { SharedWeights } from "../model/shared_weights.ts";
import { type Checkpoint, loadCheckpoint, loraDifferences, STATE_FILE } from "./checkpoint.ts";
import { initOptimizerState } from "./optimizer.ts";
import { Trainer } from "./trainer.ts";
import { algorithmOf } from "./algorithm.ts";
import { freshValueState, readValueState } from "./value_checkpoint.ts";

/** The LoRA spec of `train.lora`. */
export function loraSpecOf(train: TrainConfig): LoraSpec {
  const { r, alpha, rslora, targets } = train.lora;
  return { r, alpha, rslora, targets: [...targets] };
}

/** Refuses, before any model loads, an adapter whose LoRA shape or base model differs from the run's. */
export async function checkTrainStart(model: ModelConfig, train: TrainConfig, adapter: string | null) {
  if (!adapter) return;
  const path = join(adapter, ADAPTER_CONFIG);
  const saved = parseAdapterConfig(JSON.parse(await Deno.readTextFile(path)), path);
  const differences = loraDifferences(saved, loraSpecOf(train));
  if (differences.length > 0) {
    throw new UserError(`train: adapter ${adapter}`, {
      value: differences.join(", "),
      why: "its LoRA shape differs from train.lora",
      fix: "set train.lora (e.g. --train.lora.r=N) to the adapter's values, or start without an adapter",
    });
  }
  await checkSameBase(adapter, model.path);
}

/** Refuses to continue a checkpoint saved on another base model (its config.json differs). */
async function checkSameBase(adapter: string, modelPath: string): Promise<void> {
  let state: { base_config_sha256?: string; base_model?: string };
  try {
    state = JSON.parse(await Deno.readTextFile(join(adapter, STATE_FILE)));
  } catch {
    return; // a plain PEFT adapter: nothing recorded to compare
  }
  const sha256 = await sha256Hex(await Deno.readFile(join(modelPath, "config.json")));
  const saved = state.base_config_sha256;
  if (saved && saved !== sha256) {
    throw new UserError(`train: the adapter checkpoint's base model`, {
      value: state.base_model,
      why: `it was trained on another base model (config.json sha256 ${
        saved.slice(0, 12)
      }…, ${modelPath} has ${sha256.slice(0, 12)}…)`,
      fix: "set model.path to the base model the adapter was trained on, or start without an adapter",
    });
  }
}

export class TrainSession {
  readonly model: ModelDir;
  readonly trainer: Trainer;
  /** The adapter being trained and its optimizer state: updated in place by each step. */
  readonly checkpoint: Checkpoint;
  /** sha256 of the base model's config.json, recorded in every checkpoint. */
  readonly baseConfigSha256: string;

  /** The KL term's reference adapter (`train.loss.reference: initial`); undefined: the base model. */
  readonly reference?: LoraWeights;

  private constructor(
    model: ModelDir,
    trainer: Trainer,
    checkpoint: Checkpoint,
    baseConfigSha256: string,
    reference?: LoraWeights,
  ) {
    this.model = model;
    this.trainer = trainer;
    this.checkpoint = checkpoint;
    this.baseConfigSha256 = baseConfigSha256;
    this.reference = reference;
  }

  /**
   * Opens the model and builds the train graph once; the adapter starts from `adapter` (a checkpoint or
   * PEFT directory) or fresh (A Kaiming-uniform, B = 0, seeded by `train.seed`). With `shared.weights`
   * the train session computes on that one float32 copy (lib/model/shared_weights.ts).
   */
  static async open(
    config: Pick<Config, "model" | "train" | "mask">,
    adapter: string | null,
    shared: { dir?: ModelDir; weights?: SharedWeights | null } = {},
  ): Promise<TrainSession> {
    const { model, train } = config;
    await checkTrainStart(model, train, adapter);
    const dir = shared.dir ?? await openModelDir(model.path);
    const baseConfigSha256 = await sha256Hex(await Deno.readFile(join(dir.dir, "config.json")));
    const spec = loraSpecOf(train);
    const algorithm = algorithmOf(config);
    const checkpoint = adapter
      ? await loadCheckpoint(adapter, dir.config, train.optimizer.name)
      : freshCheckpoint(dir, spec, train);
    if (algorithm.valueLoss) {
      const { hidden_size: hidden } = dir.config;
      const { seed, optimizer } = train;
      checkpoint.value = adapter
        ? await readValueState(adapter, hidden, seed, optimizer.name)
        : freshValueState(hidden, seed, optimizer.name);
    }
    const trainer = await Trainer.create(dir, {
      lora: spec,
      ...algorithm,
      ep: model.ep,
      compute: model.compute_dtype,
    }, {
      providerOptions: providerOptionsOf(model),
      threads: model.threads,
      sharedWeights: shared.weights,
      forwardSession: model.webgpu.forward_session,
    });
    return new TrainSession(dir, trainer, checkpoint, baseConfigSha256, await referenceOf(config, dir));
  }

  async close(): Promise<void> {
    await this.trainer.close();
  }
}

/**
 * The KL term's reference adapter with `train.loss.reference: initial`: `model.adapter`, the adapter the
 * run started from, read once into its own tensors (the trained adapter changes in place; a resumed run's
 * session starts from a later checkpoint but keeps the run's `model.adapter`). Undefined when the KL term
 * is off, the reference is the base model, or the run started without an adapter (the reference is then
 * the base model: a fresh adapter's B is 0).
 */
async function referenceOf(
  config: Pick<Config, "model" | "train">,
  dir: ModelDir,
): Promise<LoraWeights | undefined> {
  const { model, train } = config;
  if (train.loss.beta === 0 || train.loss.reference === "base" || !model.adapter) return undefined;
  await checkTrainStart(model, train, model.adapter);
  return (await readPeftAdapter(model.adapter, dir.config)).weights;
}

function freshCheckpoint(model: ModelDir, spec: LoraSpec, train: TrainConfig): Checkpoint {
  const adapter: Adapter = { spec, weights: initLoraWeights(model.config, spec, train.seed) };
  return { adapter, optimizer: initOptimizerState(train.optimizer.name, adapter.weights) };
}
