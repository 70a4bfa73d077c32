/**
 * Seeded random Qwen3 weights for the reference's own tests (plain TS, no project code).
 *
 * Dimensions: V vocab, H hidden, I intermediate, nH / nKV heads, D head dim, r LoRA rank.
 *
 * @module
 */

import type { LoraPair, LoraSpec, Qwen3Config, RefTensor } from "./types.ts";

/** mulberry32: a small seeded PRNG giving uniform floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A tiny Qwen3 config (1 layer, vocab 11, hidden 8, 2 heads sharing 1 KV head); override any field. */
export function tinyConfig(overrides: Partial<Qwen3Config> = {}): Qwen3Config {
  return {
    vocab_size: 11,
    hidden_size: 8,
    intermediate_size: 12,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    head_dim: 4,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    tie_word_embeddings: true,
    ...overrides,
  };
}

/** `[out, in]` of each LoRA-able Linear, by its module name (`q_proj`, ..., `down_proj`). */
export function linearShape(cfg: Qwen3Config, module: string): [number, number] {
  const { hidden_size: H, intermediate_size: I, head_dim: D } = cfg;
  const q = cfg.num_attention_heads * D, kv = cfg.num_key_value_heads * D;
  const shapes: Record<string, [number, number]> = {
    q_proj: [q, H],
    k_proj: [kv, H],
    v_proj: [kv, H],
    o_proj: [H, q],
    gate_proj: [I, H],
    up_proj: [I, H],
    down_proj: [H, I],
  };
  const s = shapes[module];
  if (!s) throw new Error(`Unknown Linear "${module}": use one of ${Object.keys(shapes).join(", ")}.`);
  return s;
}

/** HF module path of a Linear, e.g. `model.layers.0.self_attn.q_proj`. */
export function modulePath(layer: number, module: string): string {
  const group = ["gate_proj", "up_proj", "down_proj"].includes(module) ? "mlp" : "self_attn";
  return `model.layers.${layer}.${group}.${module}`;
}

/** Uniform values in `[center - spread, center + spread)` as a float32 tensor. */
export function randomTensor(shape: number[], rand: () => number, spread: number, center = 0): RefTensor {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = center + spread * (2 * rand() - 1);
  return { shape, data };
}

/**
 * Random Qwen3 weights in HF names and layouts: Linears uniform ±1/sqrt(in), norms 1 ± 0.2,
 * embeddings ±0.5 (`spread` overrides the embedding range). `lm_head` only when untied.
 */
export function randomWeights(cfg: Qwen3Config, seed: number, spread = 0.5): Map<string, RefTensor> {
  const rand = mulberry32(seed);
  const { hidden_size: H, head_dim: D, vocab_size: V } = cfg;
  const w = new Map<string, RefTensor>();
  const norm = (name: string, n: number) => w.set(name, randomTensor([n], rand, 0.2, 1));
  w.set("model.embed_tokens.weight", randomTensor([V, H], rand, spread));
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    const p = `model.layers.${n}`;
    norm(`${p}.input_layernorm.weight`, H);
    norm(`${p}.post_attention_layernorm.weight`, H);
    norm(`${p}.self_attn.q_norm.weight`, D);
    norm(`${p}.self_attn.k_norm.weight`, D);
    for (const m of ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]) {
      const [o, i] = linearShape(cfg, m);
      w.set(`${modulePath(n, m)}.weight`, randomTensor([o, i], rand, 1 / Math.sqrt(i)));
    }
  }
  norm("model.norm.weight", H);
  if (!cfg.tie_word_embeddings) w.set("lm_head.weight", randomTensor([V, H], rand, spread));
  return w;
}

/** Random LoRA (A and B both nonzero, ±`spread`) on `modules` of every layer. */
export function randomLora(
  cfg: Qwen3Config,
  modules: string[],
  opts: { rank: number; scale: number; seed: number; spread?: number },
): LoraSpec {
  const rand = mulberry32(opts.seed);
  const spread = opts.spread ?? 0.3;
  const targets = new Map<string, LoraPair>();
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    for (const m of modules) {
      const [o, i] = linearShape(cfg, m);
      const A = randomTensor([opts.rank, i], rand, spread), B = randomTensor([o, opts.rank], rand, spread);
      targets.set(modulePath(n, m), { A, B });
    }
  }
  return { scale: opts.scale, targets };
}
