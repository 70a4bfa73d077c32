/**
 * Types of the independent float64 Qwen3 reference (tests only; shares no code with `lib/`).
 *
 * Tensor names, shapes and config fields follow Hugging Face transformers' Qwen3 exactly, so a
 * checkpoint read from `model.safetensors` (converted to Float32Array / Float64Array) plugs in as is.
 *
 * @module
 */

/** The `config.json` fields the reference reads (Hugging Face names). */
export interface Qwen3Config {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  rms_norm_eps: number;
  rope_theta: number;
  tie_word_embeddings: boolean;
}

/** Element storage the reference accepts; all arithmetic is done in float64 (JS numbers). */
export type FloatData = Float64Array | Float32Array;

/** A dense row-major tensor, Hugging Face layout (`[out, in]` for Linear weights). */
export interface RefTensor {
  shape: number[];
  data: FloatData;
}

/** Weights by Hugging Face tensor name (`model.layers.0.self_attn.q_proj.weight`, ...). */
export type WeightSource = Map<string, RefTensor> | ((name: string) => RefTensor | undefined);

/** One LoRA pair: A `[r, in]`, B `[out, r]`. */
export interface LoraPair {
  A: RefTensor;
  B: RefTensor;
}

/**
 * LoRA with PEFT semantics: `W' = W + scale · B · A`, `scale = alpha / r` (or `alpha / sqrt(r)` for
 * rsLoRA, the caller decides). Keys are module paths such as `model.layers.0.self_attn.q_proj`.
 */
export interface LoraSpec {
  scale: number;
  targets: Map<string, LoraPair>;
}
