/**
 * Train checkpoints: a PEFT adapter directory (loadable by peft, vLLM, transformers and `loadPolicy`)
 * plus what resuming needs, written as one unit (lib/fs/atomic_dir.ts):
 *
 *   adapter_config.json, adapter_model.safetensors   PEFT LoRA, float32
 *   optimizer.safetensors                            AdamW moments `exp_avg.<key>`, `exp_avg_sq.<key>`;
 *                                                    metadata: optimizer, step, moment_steps
 *   trainer_state.json                               optimizer step, optimizer name, base model, config hash
 *   value_head.safetensors, value_optimizer.safetensors   PPO's value head and its optimizer, when trained
 *                                                    (value_checkpoint.ts)
 *
 * @module
 */

import { join } from "node:path";
import { UserError } from "../errors.ts";
import { writeDirAtomic } from "../fs/atomic_dir.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { type Adapter, type LoraSpec, loraTensorSpecs } from "../model/lora.ts";
import { peftBaseModelName, readPeftAdapter, writePeftFiles } from "../model/peft.ts";
import { readHeader, readTensor, writeSafetensors, writeTextAtomic } from "../safetensors/mod.ts";
import { TOOLKIT_VERSION } from "../arrow/metadata.ts";
import { initOptimizerState, momentStepsOf, type OptimizerState } from "./optimizer.ts";
import { valueCheckpointBytes, type ValueState, writeValueState } from "./value_checkpoint.ts";

export const OPTIMIZER_FILE = "optimizer.safetensors";
export const STATE_FILE = "trainer_state.json";

/** `trainer_state.json`. */
export interface TrainerStateFile {
  step: number;
  optimizer: "adamw" | "sgd";
  base_model: string;
  /** sha256 of the base model's config.json: resuming on another base model is refused. */
  base_config_sha256: string;
  config_hash: string;
  toolkit_version: string;
}

/** What a checkpoint holds. */
export interface Checkpoint {
  adapter: Adapter;
  optimizer: OptimizerState;
  /** The saved trainer state, when the checkpoint was written by the train stage. */
  state?: TrainerStateFile | null;
  /** PPO's value head and its optimizer, when the algorithm has one. */
  value?: ValueState;
}

/** Writes a checkpoint to `dir`; `extra` writes more files into the same unit (e.g. metrics.arrow). */
export async function saveCheckpoint(
  dir: string,
  checkpoint: Checkpoint,
  cfg: Qwen3Config,
  info: { baseModel: string; baseConfigSha256: string; configHash: string },
  extra?: (tmp: string) => Promise<void>,
): Promise<void> {
  await writeDirAtomic(dir, async (tmp) => {
    await writePeftFiles(tmp, checkpoint.adapter, cfg, await peftBaseModelName(info.baseModel));
    await writeOptimizer(join(tmp, OPTIMIZER_FILE), checkpoint, cfg);
    if (checkpoint.value) await writeValueState(tmp, checkpoint.value, cfg.hidden_size);
    const state: TrainerStateFile = {
      step: checkpoint.optimizer.step,
      optimizer: checkpoint.optimizer.name,
      base_model: info.baseModel,
      base_config_sha256: info.baseConfigSha256,
      config_hash: info.configHash,
      toolkit_version: TOOLKIT_VERSION,
    };
    await writeTextAtomic(join(tmp, STATE_FILE), JSON.stringify(state, null, 2));
    await extra?.(tmp);
  }, {
    kind: "adapter-dir",
    bytes: checkpointBytes(cfg, checkpoint.adapter.spec, checkpoint.optimizer.name, 0) +
      (checkpoint.value ? valueCheckpointBytes(cfg.hidden_size) : 0),
  });
}

/** Room for the JSON files, safetensors headers and metrics.arrow beside the tensors (generous). */
const CHECKPOINT_SLACK = 256 << 10;

/**
 * The bytes a checkpoint of `spec` on a model with `cfg` takes: the float32 adapter, AdamW's two
 * moments (none for SGD), headers, JSON and a metrics file of `steps` rows. Known from the LoRA shape
 * alone, so the train stage checks for room before the model loads.
 */
export function checkpointBytes(
  cfg: Qwen3Config,
  spec: LoraSpec,
  optimizer: "adamw" | "sgd",
  steps: number,
): number {
  const adapter = loraTensorSpecs(cfg, spec).reduce((n, t) => n + 4 * t.dims[0] * t.dims[1], 0);
  return adapter * (optimizer === "adamw" ? 3 : 1) + CHECKPOINT_SLACK + 256 * steps;
}

async function writeOptimizer(path: string, c: Checkpoint, cfg: Qwen3Config): Promise<void> {
  const tensors = [];
  if (c.optimizer.name === "adamw") {
    for (const t of loraTensorSpecs(cfg, c.adapter.spec)) {
      tensors.push({
        name: `exp_avg.${t.key}`,
        dtype: "F32" as const,
        shape: [...t.dims],
        data: c.optimizer.m.get(t.key)!,
      });
      tensors.push({
        name: `exp_avg_sq.${t.key}`,
        dtype: "F32" as const,
        shape: [...t.dims],
        data: c.optimizer.v.get(t.key)!,
      });
    }
  }
  await writeSafetensors(path, tensors, {
    optimizer: c.optimizer.name,
    step: String(c.optimizer.step),
    moment_steps: String(c.optimizer.momentSteps),
  });
}

/**
 * Reads the checkpoint (or plain PEFT adapter) at `dir`. A plain adapter resumes with fresh optimizer
 * state at step 0 for `optimizer`; one saved for another optimizer at its saved step (the schedule goes on)
 * with fresh moments (AdamW's bias correction starts again: `OptimizerState.momentSteps`).
 */
export async function loadCheckpoint(
  dir: string,
  cfg: Qwen3Config,
  optimizer: "adamw" | "sgd",
): Promise<Checkpoint> {
  const adapter = await readPeftAdapter(dir, cfg);
  const state = await readState(join(dir, STATE_FILE));
  if (!state || state.optimizer !== optimizer) {
    return { adapter, optimizer: freshState(optimizer, adapter, state?.step ?? 0), state };
  }
  const path = join(dir, OPTIMIZER_FILE);
  const header = await readHeader(path);
  const read = async (name: string) =>
    (await readTensor(header, name, { asFloat32: true })).data as Float32Array;
  const m = new Map<string, Float32Array>(), v = new Map<string, Float32Array>();
  if (optimizer === "adamw") {
    for (const t of loraTensorSpecs(cfg, adapter.spec)) {
      m.set(t.key, await read(`exp_avg.${t.key}`));
      v.set(t.key, await read(`exp_avg_sq.${t.key}`));
    }
  }
  const momentSteps = momentStepsOf(header.metadata, state.step);
  return { adapter, optimizer: { name: optimizer, step: state.step, momentSteps, m, v }, state };
}

function freshState(name: "adamw" | "sgd", adapter: Adapter, step: number): OptimizerState {
  return { ...initOptimizerState(name, adapter.weights), step };
}

async function readState(path: string): Promise<TrainerStateFile | null> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  try {
    const state = JSON.parse(text) as TrainerStateFile;
    if (!Number.isSafeInteger(state.step) || state.step < 0) throw new Error("step");
    return state;
  } catch {
    throw new UserError(path, {
      value: text.slice(0, 80),
      why: "it is not a valid trainer state",
      fix: "resume from an intact checkpoint",
    });
  }
}

/** The fields in which two LoRA specs differ (empty when equal), for resume checks. */
export function loraDifferences(saved: LoraSpec, wanted: LoraSpec): string[] {
  const out: string[] = [];
  if (saved.r !== wanted.r) out.push(`r ${saved.r} ≠ ${wanted.r}`);
  if (saved.alpha !== wanted.alpha) out.push(`alpha ${saved.alpha} ≠ ${wanted.alpha}`);
  if (saved.rslora !== wanted.rslora) out.push(`rslora ${saved.rslora} ≠ ${wanted.rslora}`);
  const [a, b] = [[...saved.targets].sort().join(","), [...wanted.targets].sort().join(",")];
  if (a !== b) out.push(`targets [${a}] ≠ [${b}]`);
  return out;
}
