/**
 * The float64 reference Qwen3 (tests/reference) loaded from a model directory on disk, optionally with
 * a LoRA adapter given as PEFT-keyed tensors. Reads tensors with the safetensors reader only (no graph
 * code), widening bf16 / f16 to float32 exactly.
 *
 * @module
 */

import { openModelDir } from "../../lib/model/model_dir.ts";
import { readTensor } from "../../lib/safetensors/mod.ts";
import { Qwen3Reference } from "../reference/qwen3_f64.ts";
import type { LoraPair, LoraSpec, RefTensor } from "../reference/types.ts";

/** A LoRA adapter for the reference: PEFT keys → float32 data, with the dims of each tensor. */
export interface ReferenceLora {
  scale: number;
  weights: Map<string, Float32Array>;
  dims: Map<string, number[]>;
}

/** Loads the reference for the model at `dir` (and `lora`, applied unmerged). */
export async function loadReference(dir: string, lora?: ReferenceLora): Promise<Qwen3Reference> {
  const model = await openModelDir(dir);
  const weights = new Map<string, RefTensor>();
  for (const [name, info] of model.checkpoint.tensors) {
    const header = model.checkpoint.headers.get(info.file)!;
    const t = await readTensor(header, name, { asFloat32: true });
    weights.set(name, { shape: t.shape, data: t.data as Float32Array });
  }
  return new Qwen3Reference(model.config, weights, lora && referenceLora(lora));
}

function referenceLora(lora: ReferenceLora): LoraSpec {
  const targets = new Map<string, LoraPair>();
  for (const [key, data] of lora.weights) {
    const match = /^base_model\.model\.(.+)\.lora_A\.weight$/.exec(key);
    if (!match) continue;
    const bKey = key.replace(".lora_A.", ".lora_B.");
    targets.set(match[1], {
      A: { shape: lora.dims.get(key)!, data },
      B: { shape: lora.dims.get(bKey)!, data: lora.weights.get(bKey)! },
    });
  }
  return { scale: lora.scale, targets };
}
