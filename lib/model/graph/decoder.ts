/**
 * The Qwen3 decoder as a composition of ops of the table: embedding, per layer RMSNorm → q/k/v (q/k
 * RMSNorm per head) → attention → o_proj residual, RMSNorm → SwiGLU MLP residual, then the final norm.
 * Attention is a parameter: the inference graph plugs in GroupQueryAttention with a KV cache, the
 * train graph an attention made of primitive ops (so that every step has a gradient rule). RoPE
 * belongs to the attention (GroupQueryAttention applies it inside).
 *
 * Activations are kept 2-D, one row per token, so every Linear is one Gemm with `transB` against
 * the `[out, in]` checkpoint matrix (no transposed copy of a weight, and `dX = dY · W` needs none).
 *
 * Compute dtype (`DecoderParts.compute`, graph/forms.ts): float32, or float16 on a GPU provider. In
 * float16 the embedding, the Linears, attention and the residual stream are float16; each RMSNorm runs
 * in float32 (its mean of squares would overflow float16 where activations reach the hundreds) and casts
 * back; LoRA tensors arrive as float32 inputs and are cast in the graph; the final norm's output, which
 * the head reads, is float32, so logits, log-probs and the loss are float32 in either dtype.
 *
 * Dimension legend:
 *   N    tokens in the call (batch × sequence, flattened)     V    vocab_size
 *   H    hidden_size                                          I    intermediate_size
 *   nH   num_attention_heads                                  nKV  num_key_value_heads
 *   D    head_dim                                             r    LoRA rank
 *
 * @module
 */

import type { GraphBuilder, Value } from "../../onnx/builder.ts";
import { rmsNorm, swiglu } from "../../onnx/compose.ts";
import { OPS } from "../../onnx/ops.ts";
import type { Qwen3Config } from "../hf_config.ts";
import type { QwenLinear } from "../lora.ts";
import { linearShape, QWEN3_LINEAR_GROUPS } from "../model_dir.ts";
import type { LoraInputs, LoraPairValues } from "./lora_inputs.ts";
import type { GraphWeights } from "./weights.ts";
import type { ComputeDtype } from "./forms.ts";

const { Add, Cast, Gather, Gemm, Mul, Reshape, Split } = OPS;

/** Attention of one layer: q `[N, nH*D]`, k and v `[N, nKV*D]` (q/k already normed, no RoPE yet) → `[N, nH*D]`. */
export type AttentionFn = (layer: number, q: Value, k: Value, v: Value) => Value;

/** What the decoder needs. */
export interface DecoderParts {
  cfg: Qwen3Config;
  weights: GraphWeights;
  lora: LoraInputs;
  attention: AttentionFn;
}

/** Hidden states after the final norm, `[N, H]` float32, for token ids `[N]` (int64). */
export function decoder(g: GraphBuilder, ids: Value, parts: DecoderParts): Value {
  const { cfg, weights } = parts;
  let x = Gather.emit(g, weights.get("model.embed_tokens.weight"), ids, 0); // [N, H]
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    x = g.scope(`layers.${layer}`, () => decoderLayer(g, x, layer, parts)); // [N, H]
  }
  return rmsNorm(g, toDtype(g, x, "float32"), weights.get("model.norm.weight"), cfg.rms_norm_eps); // [N, H]
}

/** The head matrix `[V, H]` in float32: `lm_head.weight`, or the embedding table when tied. */
export function headWeight(cfg: Qwen3Config, weights: GraphWeights): Value {
  return weights.float32(cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
}

/** `x` in `dtype` (itself when it already is). */
export function toDtype(g: GraphBuilder, x: Value, dtype: ComputeDtype): Value {
  return x.dtype === dtype ? x : Cast.emit(g, x, dtype);
}

/** RMSNorm in float32, returned in x's dtype (float32: exactly `rmsNorm`). */
function norm(g: GraphBuilder, x: Value, weight: Value, eps: number): Value {
  if (x.dtype === "float32") return rmsNorm(g, x, weight, eps);
  return toDtype(g, rmsNorm(g, toDtype(g, x, "float32"), weight, eps), x.dtype as ComputeDtype);
}

function decoderLayer(g: GraphBuilder, x: Value, layer: number, parts: DecoderParts): Value {
  const { cfg, weights } = parts;
  const { rms_norm_eps: eps, num_attention_heads: nH, num_key_value_heads: nKV, head_dim: D } = cfg;
  const w = (name: string) => weights.get(`model.layers.${layer}.${name}.weight`);
  const projs = (input: Value, group: readonly QwenLinear[]) =>
    linearsWithLora(
      g,
      input,
      weights.linears(layer, group),
      group.map((linear) => ({ out: linearShape(cfg, linear)[0], lora: parts.lora.pair(layer, linear) })),
    );
  const [qkv, o, gateUp, down] = QWEN3_LINEAR_GROUPS; // q/k/v, o, gate/up, down

  const n = norm(g, x, w("input_layernorm"), eps); // [N, H]
  const [qp, kp, v] = projs(n, qkv); // [N, nH*D], [N, nKV*D], [N, nKV*D]
  const q = headNorm(g, qp, w("self_attn.q_norm"), nH, D, eps); // [N, nH*D]
  const k = headNorm(g, kp, w("self_attn.k_norm"), nKV, D, eps); // [N, nKV*D]
  const attn = g.scope("attn", () => parts.attention(layer, q, k, v)); // [N, nH*D]
  const h = Add.emit(g, x, projs(attn, o)[0]); // [N, H]

  const m = norm(g, h, w("post_attention_layernorm"), eps); // [N, H]
  const [gate, up] = projs(m, gateUp); // [N, I] each
  return Add.emit(g, h, projs(swiglu(g, gate, up), down)[0]); // [N, H]
}

/** RMSNorm over each head's D features: `[N, heads*D]` → `[N, heads*D]`. */
function headNorm(g: GraphBuilder, x: Value, weight: Value, heads: number, D: number, eps: number): Value {
  const perHead = Reshape.emit(g, x, [0, heads, D]); // [N, heads, D]
  return Reshape.emit(g, norm(g, perHead, weight, eps), [0, heads * D]); // [N, heads*D]
}

/** One Linear of a group: its output size (rows of the stacked weight) and adapter. */
export interface LinearMember {
  out: number;
  lora: LoraPairValues | undefined;
}

/**
 * Linears that read the same input (q, k, v; gate, up) as one Gemm over their stacked `[Σout, in]`
 * weight (`GraphWeights.linears`), split after: one pass over x and, backward, one `dX = dY · W` instead
 * of a sum of three. Each member adds its own LoRA `scale · (x Aᵀ) Bᵀ`, the scale applied to the
 * rank-r product (cheaper than to the `[N, out]` one). x `[N, in]` → one `[N, out_i]` per member.
 * The adapter's float32 inputs are cast to x's dtype.
 */
export function linearsWithLora(
  g: GraphBuilder,
  x: Value,
  stacked: Value,
  members: readonly LinearMember[],
): Value[] {
  const y = Gemm.emit(g, x, stacked, null, { transB: true }); // [N, Σout]
  const parts = members.length === 1 ? [y] : Split.emit(g, y, members.map((m) => m.out), 1); // [N, out_i]
  return parts.map((part, i) => {
    const lora = members[i].lora;
    if (!lora) return part;
    const dtype = (x.dtype ?? "float32") as ComputeDtype;
    const [a, b, scale] = [lora.a, lora.b, lora.scale].map((v) => toDtype(g, v, dtype));
    const u = Mul.emit(g, Gemm.emit(g, x, a, null, { transB: true }), scale); // [N, r]
    return Gemm.emit(g, u, b, part, { transB: true }); // [N, out_i]: u Bᵀ + part, one pass
  });
}
