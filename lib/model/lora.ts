/**
 * LoRA adapters with PEFT semantics: `W' = W + scale · B · A`, A `[r, in]`, B `[out, r]`,
 * `scale = alpha / r` (or `alpha / sqrt(r)` with rsLoRA). Tensors are keyed by their PEFT names
 * (`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`), which are also the names of the
 * graph inputs that carry them, so an adapter file maps onto a graph without translation.
 *
 * Dimensions: r rank, in / out the Linear's input and output features.
 *
 * @module
 */

import type { Qwen3Config } from "./hf_config.ts";
import { linearPath, linearShape, QWEN3_LINEARS } from "./model_dir.ts";
import { Rng, streamSeed } from "./prng.ts";

/** Short names of the LoRA-able projections, as `train.lora.targets` spells them. */
export const LORA_TARGET_NAMES = ["q", "k", "v", "o", "gate", "up", "down"] as const;
export type LoraTargetName = typeof LORA_TARGET_NAMES[number];
export type QwenLinear = typeof QWEN3_LINEARS[number];

/** `q` → `q_proj`, …: the Hugging Face module name of each short name. */
export const TARGET_MODULE: Readonly<Record<LoraTargetName, QwenLinear>> = {
  q: "q_proj",
  k: "k_proj",
  v: "v_proj",
  o: "o_proj",
  gate: "gate_proj",
  up: "up_proj",
  down: "down_proj",
};

/** What fixes a LoRA graph's inputs: rank and targets (alpha only sets the scale, a graph input). */
export interface LoraShape {
  r: number;
  /** In Hugging Face order (q, k, v, o, gate, up, down). */
  targets: readonly LoraTargetName[];
}

/** An adapter's hyper-parameters. */
export interface LoraSpec extends LoraShape {
  alpha: number;
  rslora: boolean;
}

/** One LoRA tensor of a model. */
export interface LoraTensorSpec {
  /** PEFT name, also the graph input name. */
  key: string;
  layer: number;
  linear: QwenLinear;
  which: "A" | "B";
  /** `[r, in]` for A, `[out, r]` for B. */
  dims: [number, number];
}

/** Adapter tensors by PEFT name, float32, row-major. */
export type LoraWeights = Map<string, Float32Array>;

/** A loaded adapter: its spec and tensors. */
export interface Adapter {
  spec: LoraSpec;
  weights: LoraWeights;
}

/** `alpha / r`, or `alpha / sqrt(r)` for rsLoRA. */
export function loraScale(spec: Pick<LoraSpec, "r" | "alpha" | "rslora">): number {
  return spec.rslora ? spec.alpha / Math.sqrt(spec.r) : spec.alpha / spec.r;
}

/** `base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight`. */
export function peftKey(layer: number, linear: QwenLinear, which: "A" | "B"): string {
  return `base_model.model.${linearPath(layer, linear)}.lora_${which}.weight`;
}

/** Targets sorted into Hugging Face order, duplicates removed. */
export function orderedTargets(targets: readonly LoraTargetName[]): LoraTargetName[] {
  return LORA_TARGET_NAMES.filter((t) => targets.includes(t));
}

/** Every LoRA tensor of `shape` on a model with `cfg`, layer by layer, A before B. */
export function loraTensorSpecs(cfg: Qwen3Config, shape: LoraShape): LoraTensorSpec[] {
  const out: LoraTensorSpec[] = [];
  const targets = orderedTargets(shape.targets);
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    for (const target of targets) {
      const linear = TARGET_MODULE[target];
      const [outDim, inDim] = linearShape(cfg, linear);
      out.push({ key: peftKey(layer, linear, "A"), layer, linear, which: "A", dims: [shape.r, inDim] });
      out.push({ key: peftKey(layer, linear, "B"), layer, linear, which: "B", dims: [outDim, shape.r] });
    }
  }
  return out;
}

/**
 * A fresh adapter as PEFT initializes one: A Kaiming-uniform with a = √5, i.e. U(-1/√in, 1/√in), and
 * B = 0, so the adapted model starts equal to the base. Seeded per tensor name (prng.ts).
 */
export function initLoraWeights(cfg: Qwen3Config, shape: LoraShape, seed: number): LoraWeights {
  const weights: LoraWeights = new Map();
  for (const t of loraTensorSpecs(cfg, shape)) {
    const data = new Float32Array(t.dims[0] * t.dims[1]);
    if (t.which === "A") {
      const bound = 1 / Math.sqrt(t.dims[1]);
      const rng = new Rng(streamSeed(seed, t.key));
      for (let i = 0; i < data.length; i++) data[i] = (2 * rng.uniform() - 1) * bound;
    }
    weights.set(t.key, data);
  }
  return weights;
}

/** Zero A and B tensors: the base model through a LoRA-shaped graph. */
export function zeroLoraWeights(cfg: Qwen3Config, shape: LoraShape): LoraWeights {
  return new Map(loraTensorSpecs(cfg, shape).map((t) => [t.key, new Float32Array(t.dims[0] * t.dims[1])]));
}

/** Whether two shapes give the same graph inputs. */
export function sameLoraShape(a: LoraShape | null, b: LoraShape | null): boolean {
  if (a === null || b === null) return a === b;
  return a.r === b.r && orderedTargets(a.targets).join() === orderedTargets(b.targets).join();
}
