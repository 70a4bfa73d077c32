/**
 * The value head's part of a train checkpoint (PPO), beside the PEFT adapter in the same directory and
 * written in the same atomic unit (checkpoint.ts):
 *
 *   value_head.safetensors        the head's four float32 tensors, named as torch's state dict
 *   value_optimizer.safetensors   its optimizer's moments `exp_avg.<key>`, `exp_avg_sq.<key>` (AdamW) and,
 *                                 in the metadata, the optimizer's name and step
 *
 * Reading: a checkpoint without `value_head.safetensors` (a plain adapter, a warm start) gives a fresh
 * head from the seed with a fresh optimizer; one whose optimizer file is missing or was saved for
 * another optimizer gives the saved head with a fresh optimizer. A head of another hidden size is
 * refused in one line.
 *
 * @module
 */

import { join } from "node:path";
import { UserError } from "../errors.ts";
import { readHeader, readTensor, type SafetensorsHeader, writeSafetensors } from "../safetensors/mod.ts";
import { initOptimizerState, momentStepsOf, type OptimizerState, type Tensors } from "./optimizer.ts";
import { initValueHead, sizeOf, valueHeadSpecs } from "./value_head.ts";

export const VALUE_HEAD_FILE = "value_head.safetensors";
export const VALUE_OPTIMIZER_FILE = "value_optimizer.safetensors";

/** The value head being trained and its optimizer state. */
export interface ValueState {
  weights: Tensors;
  optimizer: OptimizerState;
}

/** A fresh head (seeded) with a fresh optimizer. */
export function freshValueState(hidden: number, seed: number, optimizer: "adamw" | "sgd"): ValueState {
  const weights = initValueHead(hidden, seed);
  return { weights, optimizer: initOptimizerState(optimizer, weights) };
}

/** Bytes the two files take for hidden size `hidden` (tensors, moments, headers), generously. */
export function valueCheckpointBytes(hidden: number): number {
  const elements = valueHeadSpecs(hidden).reduce((n, t) => n + sizeOf(t.dims), 0);
  return 3 * 4 * elements + (16 << 10);
}

/** Writes the head and its optimizer state into the checkpoint directory being written (`dir`). */
export async function writeValueState(dir: string, value: ValueState, hidden: number): Promise<void> {
  const specs = valueHeadSpecs(hidden);
  await writeSafetensors(
    join(dir, VALUE_HEAD_FILE),
    specs.map((t) => ({
      name: t.key,
      dtype: "F32" as const,
      shape: t.dims,
      data: value.weights.get(t.key)!,
    })),
  );
  const { optimizer } = value;
  const moments = optimizer.name === "adamw"
    ? specs.flatMap((t) => [
      { name: `exp_avg.${t.key}`, dtype: "F32" as const, shape: t.dims, data: optimizer.m.get(t.key)! },
      { name: `exp_avg_sq.${t.key}`, dtype: "F32" as const, shape: t.dims, data: optimizer.v.get(t.key)! },
    ])
    : [];
  await writeSafetensors(join(dir, VALUE_OPTIMIZER_FILE), moments, {
    optimizer: optimizer.name,
    step: String(optimizer.step),
    moment_steps: String(optimizer.momentSteps),
  });
}

/** The head and optimizer saved in `dir`, or fresh ones (see the module doc). */
export async function readValueState(
  dir: string,
  hidden: number,
  seed: number,
  optimizer: "adamw" | "sgd",
): Promise<ValueState> {
  const head = await headerOrNull(join(dir, VALUE_HEAD_FILE));
  if (!head) return freshValueState(hidden, seed, optimizer);
  const specs = valueHeadSpecs(hidden);
  const weights: Tensors = new Map();
  for (const t of specs) weights.set(t.key, await readShaped(head, t.key, t.dims));
  const saved = await headerOrNull(join(dir, VALUE_OPTIMIZER_FILE));
  if (!saved || saved.metadata.optimizer !== optimizer) {
    return { weights, optimizer: initOptimizerState(optimizer, weights) };
  }
  const state = initOptimizerState(optimizer, weights);
  state.step = Number(saved.metadata.step ?? 0);
  state.momentSteps = momentStepsOf(saved.metadata, state.step);
  if (optimizer === "adamw") {
    for (const t of specs) {
      state.m.set(t.key, await readShaped(saved, `exp_avg.${t.key}`, t.dims));
      state.v.set(t.key, await readShaped(saved, `exp_avg_sq.${t.key}`, t.dims));
    }
  }
  return { weights, optimizer: state };
}

async function headerOrNull(path: string): Promise<SafetensorsHeader | null> {
  try {
    await Deno.stat(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
  return await readHeader(path);
}

/** Tensor `name` as float32, refused in one line unless it has `dims`. */
async function readShaped(header: SafetensorsHeader, name: string, dims: number[]): Promise<Float32Array> {
  const shape = header.tensors.get(name)?.shape;
  if (shape && shape.join() !== dims.join()) {
    throw new UserError(`${header.path}: tensor "${name}"`, {
      value: `[${shape.join(", ")}]`,
      why: `the value head of this model has shape [${dims.join(", ")}] (hidden size ${dims.at(-1)})`,
      fix: "continue from a checkpoint trained on this base model, or start without an adapter",
    });
  }
  return (await readTensor(header, name, { asFloat32: true })).data as Float32Array;
}
