/**
 * The float64 reference Qwen3 (tests/reference) loaded from a model directory on disk: every
 * checkpoint tensor read with the safetensors reader only (no graph code) and widened to float32
 * (bf16 / f16 exactly), with an optional LoRA in the reference's own form, applied unmerged.
 *
 * @module
 */

import { openModelDir } from "../../lib/model/model_dir.ts";
import { readTensor } from "../../lib/safetensors/mod.ts";
import { type LoraSpec, Qwen3Reference, type RefTensor } from "../reference/qwen3_f64.ts";

/** The reference model of the directory `dir`, with `lora` applied unmerged when given. */
export async function loadReference(dir: string, lora?: LoraSpec): Promise<Qwen3Reference> {
  const { config, weights } = await readReferenceWeights(dir);
  return new Qwen3Reference(config, weights, lora);
}

/** The config and every weight of `dir`, to build many references (e.g. for finite differences). */
export async function readReferenceWeights(dir: string) {
  const model = await openModelDir(dir);
  const weights = new Map<string, RefTensor>();
  for (const [name, info] of model.checkpoint.tensors) {
    const t = await readTensor(model.checkpoint.headers.get(info.file)!, name, { asFloat32: true });
    weights.set(name, { shape: t.shape, data: t.data as Float32Array });
  }
  return { config: model.config, weights };
}
