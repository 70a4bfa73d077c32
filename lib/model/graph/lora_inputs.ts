/**
 * LoRA tensors as graph inputs (named by their PEFT keys) plus a `lora_scale` scalar input, so one
 * graph serves every adapter of the same rank and targets, and switching adapters is a new feed.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../../onnx/builder.ts";
import type { Qwen3Config } from "../hf_config.ts";
import { type LoraShape, loraTensorSpecs, type QwenLinear } from "../lora.ts";

/** The graph input holding `alpha / r` (or `alpha / sqrt(r)`). */
export const LORA_SCALE_INPUT = "lora_scale";

/** One Linear's adapter inside a graph. */
export interface LoraPairValues {
  a: Value; // [r, in]
  b: Value; // [out, r]
  scale: Value; // []
}

/** A graph's LoRA inputs. */
export interface LoraInputs {
  /** The pair of a Linear, or undefined when it has no adapter. */
  pair(layer: number, linear: QwenLinear): LoraPairValues | undefined;
  /** Every A and B input, in declaration order. */
  readonly tensors: readonly Value[];
}

/** Declares the LoRA inputs of `shape` on `g`; `null` gives a graph without LoRA. */
export function addLoraInputs(g: GraphBuilder, cfg: Qwen3Config, shape: LoraShape | null): LoraInputs {
  if (shape === null) return { pair: () => undefined, tensors: [] };
  const scale = g.input(LORA_SCALE_INPUT, "float32", []);
  const byKey = new Map<string, Value>();
  for (const t of loraTensorSpecs(cfg, shape)) {
    byKey.set(`${t.layer}.${t.linear}.${t.which}`, g.input(t.key, "float32", t.dims));
  }
  return {
    tensors: [...byKey.values()],
    pair(layer, linear) {
      const a = byKey.get(`${layer}.${linear}.A`);
      const b = byKey.get(`${layer}.${linear}.B`);
      return a && b ? { a, b, scale } : undefined;
    },
  };
}
