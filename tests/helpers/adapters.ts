/**
 * Random LoRA adapters for tests: A and B both nonzero (unlike a fresh PEFT adapter, whose B is 0),
 * so an adapter that is ignored, applied twice or transposed changes the log-probs visibly.
 *
 * @module
 */

import type { Qwen3Config } from "../../lib/model/hf_config.ts";
import { type Adapter, loraScale, type LoraSpec, loraTensorSpecs } from "../../lib/model/lora.ts";
import { mulberry32 } from "../reference/weights.ts";
import type { LoraPair, LoraSpec as ReferenceLora } from "../reference/types.ts";

/** An adapter of `spec` with entries uniform in ±`spread`. */
export function randomAdapter(cfg: Qwen3Config, spec: LoraSpec, seed: number, spread = 0.05): Adapter {
  const rand = mulberry32(seed);
  const weights = new Map<string, Float32Array>();
  for (const t of loraTensorSpecs(cfg, spec)) {
    weights.set(t.key, Float32Array.from({ length: t.dims[0] * t.dims[1] }, () => (2 * rand() - 1) * spread));
  }
  return { spec, weights };
}

/** The same adapter in the reference's form, keyed by module path (applied unmerged there). */
export function referenceLoraOf(cfg: Qwen3Config, adapter: Adapter): ReferenceLora {
  const targets = new Map<string, LoraPair>();
  for (const t of loraTensorSpecs(cfg, adapter.spec)) {
    const module = t.key.replace(/^base_model\.model\./, "").replace(/\.lora_[AB]\.weight$/, "");
    const pair = targets.get(module) ?? ({} as LoraPair);
    pair[t.which] = { shape: [...t.dims], data: adapter.weights.get(t.key)! };
    targets.set(module, pair);
  }
  return { scale: loraScale(adapter.spec), targets };
}
