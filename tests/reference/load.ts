/**
 * Looks up and shape-checks Hugging Face Qwen3 weights (and optional LoRA) for the reference.
 *
 * Dimensions: V vocab, H hidden, I intermediate, nH query heads, nKV key/value heads, D head dim,
 * r LoRA rank.
 *
 * @module
 */

import { linear } from "./ops.ts";
import type { FloatData, LoraPair, LoraSpec, Qwen3Config, RefTensor, WeightSource } from "./types.ts";

/** A bias-free Linear `[out, in]`, optionally with an unmerged LoRA pair. */
export class Projection {
  constructor(
    readonly name: string,
    readonly w: FloatData, // [out, in]
    readonly outDim: number,
    readonly inDim: number,
    readonly lora?: { a: FloatData; b: FloatData; r: number; scale: number },
  ) {}

  /** `x Wᵀ + scale · (x Aᵀ) Bᵀ`; x `[T, in]` → `[T, out]`. */
  apply(x: Float64Array, rows: number): Float64Array {
    const y = linear(x, rows, this.w, this.outDim, this.inDim); // [T, out]
    if (!this.lora) return y;
    const { a, b, r, scale } = this.lora;
    const u = linear(x, rows, a, r, this.inDim); // [T, r]
    const d = linear(u, rows, b, this.outDim, r); // [T, out]
    for (let i = 0; i < y.length; i++) y[i] += scale * d[i];
    return y;
  }
}

/** One decoder layer's weights. */
export interface LayerWeights {
  inputNorm: FloatData; // [H]
  q: Projection; // [nH*D, H]
  k: Projection; // [nKV*D, H]
  v: Projection; // [nKV*D, H]
  o: Projection; // [H, nH*D]
  qNorm: FloatData; // [D]
  kNorm: FloatData; // [D]
  postNorm: FloatData; // [H]
  gate: Projection; // [I, H]
  up: Projection; // [I, H]
  down: Projection; // [H, I]
}

/** All weights of the model. */
export interface ModelWeights {
  embed: FloatData; // [V, H]
  layers: LayerWeights[];
  norm: FloatData; // [H]
  head: FloatData; // [V, H] (embed when tied)
}

/** Reads every tensor the config calls for, checks shapes, attaches LoRA; throws on any mismatch. */
export function loadWeights(cfg: Qwen3Config, source: WeightSource, lora?: LoraSpec): ModelWeights {
  checkConfig(cfg);
  const get = typeof source === "function" ? source : (n: string) => source.get(n);
  const tensor = (name: string, shape: number[]) => expect(get(name), name, shape);
  const used = new Set<string>();
  const proj = (path: string, out: number, inp: number) => {
    const pair = lora?.targets.get(path);
    if (pair) used.add(path);
    const l = pair && lora ? loraOf(path, pair, out, inp, lora.scale) : undefined;
    return new Projection(path, tensor(`${path}.weight`, [out, inp]), out, inp, l);
  };
  const { hidden_size: H, intermediate_size: I, head_dim: D, vocab_size: V } = cfg;
  const qDim = cfg.num_attention_heads * D, kvDim = cfg.num_key_value_heads * D;
  const layers: LayerWeights[] = [];
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    const p = `model.layers.${n}`;
    layers.push({
      inputNorm: tensor(`${p}.input_layernorm.weight`, [H]),
      q: proj(`${p}.self_attn.q_proj`, qDim, H),
      k: proj(`${p}.self_attn.k_proj`, kvDim, H),
      v: proj(`${p}.self_attn.v_proj`, kvDim, H),
      o: proj(`${p}.self_attn.o_proj`, H, qDim),
      qNorm: tensor(`${p}.self_attn.q_norm.weight`, [D]),
      kNorm: tensor(`${p}.self_attn.k_norm.weight`, [D]),
      postNorm: tensor(`${p}.post_attention_layernorm.weight`, [H]),
      gate: proj(`${p}.mlp.gate_proj`, I, H),
      up: proj(`${p}.mlp.up_proj`, I, H),
      down: proj(`${p}.mlp.down_proj`, H, I),
    });
  }
  for (const key of lora?.targets.keys() ?? []) {
    if (!used.has(key)) {
      throw new Error(
        `LoRA target "${key}" matches no Linear of this model: use a module path such as ` +
          `"model.layers.0.self_attn.q_proj" (layers 0..${cfg.num_hidden_layers - 1}).`,
      );
    }
  }
  const embed = tensor("model.embed_tokens.weight", [V, H]);
  const head = cfg.tie_word_embeddings ? embed : tensor("lm_head.weight", [V, H]);
  return { embed, layers, norm: tensor("model.norm.weight", [H]), head };
}

function loraOf(path: string, pair: LoraPair, out: number, inp: number, scale: number) {
  const r = pair.A.shape[0];
  expect(pair.A, `${path} lora A`, [r, inp]);
  expect(pair.B, `${path} lora B`, [out, r]);
  return { a: pair.A.data, b: pair.B.data, r, scale };
}

function expect(t: RefTensor | undefined, name: string, shape: number[]): FloatData {
  if (!t) throw new Error(`Weight "${name}" is missing: the reference needs it with shape [${shape}].`);
  const size = shape.reduce((a, b) => a * b, 1);
  if (t.shape.join(",") !== shape.join(",") || t.data.length !== size) {
    throw new Error(
      `Weight "${name}" has shape [${t.shape}] and ${t.data.length} values; the config asks for ` +
        `[${shape}] (${size} values): check the config or the checkpoint.`,
    );
  }
  return t.data;
}

function checkConfig(cfg: Qwen3Config) {
  if (cfg.num_attention_heads % cfg.num_key_value_heads !== 0) {
    throw new Error(
      `num_attention_heads ${cfg.num_attention_heads} is not a multiple of ` +
        `num_key_value_heads ${cfg.num_key_value_heads}: grouped-query attention needs it to be.`,
    );
  }
  if (cfg.head_dim % 2 !== 0) {
    throw new Error(`head_dim ${cfg.head_dim} is odd: RoPE rotates halves, so it must be even.`);
  }
}
