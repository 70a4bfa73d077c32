/**
 * The Qwen3 decoder as a composition of ops of the table: embedding, per layer RMSNorm → q/k/v (q/k
 * RMSNorm per head) → attention → o_proj residual, RMSNorm → SwiGLU MLP residual, then the final norm.
 * RMSNorm is the fused op (lib/onnx/ops_norm.ts), with the residual add before it fused in.
 * Attention is a parameter: the inference graph plugs in GroupQueryAttention with a KV cache, the
 * train graph an attention made of primitive ops (so that every step has a gradient rule), fed q, k and v
 * in one tensor with q's and k's head norms as one (`PackedAttention`). RoPE belongs to the attention
 * (GroupQueryAttention applies it inside).
 *
 * Activations are kept 2-D, one row per token, so every Linear is one Gemm with `transB` against
 * the `[out, in]` checkpoint matrix (no transposed copy of a weight, and `dX = dY · W` needs none).
 *
 * Compute dtype (`DecoderParts.compute`, graph/forms.ts): float32, or float16 on a GPU provider. In
 * float16 the embedding, the Linears, attention and the residual stream are float16; each RMSNorm is one
 * fused kernel whose statistics are float32 (its mean of squares would overflow float16 where activations
 * reach the hundreds); LoRA tensors arrive as float32 inputs and are cast in the graph; the last residual
 * add and the final norm run in float32, so logits, log-probs and the loss are float32 in either dtype.
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
import { swiglu } from "../../onnx/compose.ts";
import { OPS } from "../../onnx/ops.ts";
import type { Qwen3Config } from "../hf_config.ts";
import { linearShape, QWEN3_LINEAR_GROUPS } from "../model_dir.ts";
import type { LoraGroupValues, LoraInputs, LoraPairValues } from "./lora_inputs.ts";
import type { GraphWeights } from "./weights.ts";
import type { ComputeDtype } from "./forms.ts";
import { unitNormWeight } from "../../onnx/ops_norm.ts";

const {
  Cast,
  Gather,
  Gemm,
  Mul,
  Reshape,
  SimplifiedLayerNormalization,
  SkipSimplifiedLayerNormalization,
  Split,
} = OPS;

/**
 * Attention of one layer: q `[N, nH*D]`, k and v `[N, nKV*D]` (no RoPE yet) → `[N, nH*D]`. q and k come
 * normed per head (in `DecoderParts.headLayout` where one is given), or with `DecoderParts.attentionNorms`
 * as projected, with `norms`, their per-head RMSNorm weights, for the attention to apply.
 */
export type AttentionFn = (layer: number, q: Value, k: Value, v: Value, norms?: HeadNormWeights) => Value;

/** q's and k's per-head RMSNorm weights `[D]` in the compute dtype, and the norms' epsilon. */
export interface HeadNormWeights {
  q: Value;
  k: Value;
  epsilon: number;
}

/**
 * Attention fed the q/k/v Gemm's whole output, `qkv` `[N, (nH + 2·nKV)·D]` (no RoPE yet), and `norm`, the
 * head norms of q and k together: `[B, nH + nKV, T, D]` (q's heads first) → the same, normed, q also
 * scaled by the attention's `1/sqrt(D)` (its weights carry it: `GraphWeights.headNorms`), so the scores
 * need no scaling. The attention lays the heads out once for all three (train/attention.ts); both head
 * norms are then one norm kernel and one Mul by their weights, in the forward and in the backward.
 * → `[N, nH*D]`.
 */
export interface PackedAttention {
  packed: (layer: number, qkv: Value, norm: (qk: Value) => Value) => Value;
}

/** What the decoder needs. */
export interface DecoderParts {
  cfg: Qwen3Config;
  weights: GraphWeights;
  lora: LoraInputs;
  attention: AttentionFn | PackedAttention;
  /**
   * The shape (an int64 `[rank]` value) q and k take after their per-head norm, for an attention that
   * wants another layout than rows (GroupQueryAttention's `[B, S, heads*D]`): the Reshape back from heads
   * then produces it, and the attention needs none of its own. Default `[N, heads*D]`.
   */
  headLayout?: Value;
  /** The plain norms also declare their `inv_std_var` output, for a backward to read (forms.ts `normStats`). */
  normStats?: boolean;
  /** The attention (an `AttentionFn`) applies q's and k's per-head norms itself (forms.ts `attentionNorms`). */
  attentionNorms?: boolean;
  /**
   * With `attentionNorms`: the shape q/k/v's Gemm output takes before it is split (the attention's
   * `[B, S, Σout]`), so q, k and v reach the attention in its layout; default rows `[N, ·]`.
   */
  attentionLayout?: Value | number[];
}

/** Whether a plain norm declares its statistics output (`DecoderParts.normStats`). */
interface NormHow {
  stats: boolean;
}

/**
 * Hidden states after the final norm, `[N, H]` float32, for token ids `[N]` (int64). Each residual add
 * is fused into the norm that reads its sum (SkipSimplifiedLayerNormalization, lib/onnx/ops_norm.ts):
 * a layer returns the residual stream and the delta still to be added, and the next norm adds it.
 */
export function decoder(g: GraphBuilder, ids: Value, parts: DecoderParts): Value {
  const { cfg, weights } = parts;
  const embedded = Gather.emit(g, weights.get("model.embed_tokens.weight"), ids, 0); // [N, H]
  const form: NormHow = { stats: parts.normStats ?? false };
  let stream: Residual = { sum: embedded, delta: null };
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    stream = g.scope(`layers.${layer}`, () => decoderLayer(g, stream, layer, parts, form));
  }
  // The head reads float32: the last add and the final norm run in float32.
  const last = {
    sum: toDtype(g, stream.sum, "float32"),
    delta: stream.delta && toDtype(g, stream.delta, "float32"),
  };
  return addAndNorm(g, last, weights.get("model.norm.weight"), cfg.rms_norm_eps, form).normed; // [N, H]
}

/** The residual stream `[N, H]` and the output `[N, H]` still to be added to it (null: none). */
interface Residual {
  sum: Value;
  delta: Value | null;
}

/** The head matrix `[V, H]` in float32: `lm_head.weight`, or the embedding table when tied. */
export function headWeight(cfg: Qwen3Config, weights: GraphWeights): Value {
  return weights.float32(cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
}

/** `x` in `dtype` (itself when it already is). */
export function toDtype(g: GraphBuilder, x: Value, dtype: ComputeDtype): Value {
  return x.dtype === dtype ? x : Cast.emit(g, x, dtype);
}

/**
 * RMSNorm over the last axis in x's dtype, statistics in float32 inside the kernel (the float32 norm
 * weight cast to a float16 x's dtype: an initializer, folded when the session loads).
 */
function norm(g: GraphBuilder, x: Value, weight: Value, eps: number, how: NormHow): Value {
  const w = toDtype(g, weight, x.dtype as ComputeDtype); // [E]
  return SimplifiedLayerNormalization.emit(g, x, w, eps, how.stats); // x's shape
}

/** `sum + delta` and its RMSNorm in one kernel (the norm alone where there is no delta). */
function addAndNorm(
  g: GraphBuilder,
  r: Residual,
  weight: Value,
  eps: number,
  how: NormHow,
): { normed: Value; sum: Value } {
  if (r.delta === null) return { normed: norm(g, r.sum, weight, eps, how), sum: r.sum };
  const w = toDtype(g, weight, r.sum.dtype as ComputeDtype); // [H]
  const [normed, sum] = SkipSimplifiedLayerNormalization.emit(g, r.sum, r.delta, w, eps); // [N, H] each
  return { normed, sum };
}

function decoderLayer(
  g: GraphBuilder,
  stream: Residual,
  layer: number,
  parts: DecoderParts,
  form: NormHow,
): Residual {
  const { cfg, weights } = parts;
  const { rms_norm_eps: eps, num_attention_heads: nH, num_key_value_heads: nKV, head_dim: D } = cfg;
  const w = (name: string) => weights.get(`model.layers.${layer}.${name}.weight`);
  const projs = (input: Value, index: number, layout?: Value | number[]) => {
    const group = QWEN3_LINEAR_GROUPS[index];
    const members = group.map((linear) => ({
      out: linearShape(cfg, linear)[0],
      lora: parts.lora.pair(layer, linear),
    }));
    const adapter = parts.lora.group(layer, index);
    return linearsWithLora(g, input, weights.linears(layer, group), members, adapter, layout);
  };
  const [qkv, o, gateUp, down] = [0, 1, 2, 3]; // QWEN3_LINEAR_GROUPS: q/k/v, o, gate/up, down

  const { normed: n, sum: x } = addAndNorm(g, stream, w("input_layernorm"), eps, form); // [N, H] each
  const attention = parts.attention;
  let attn: Value; // [N, nH*D]
  if (typeof attention === "function") {
    const layout = parts.attentionNorms ? parts.attentionLayout : undefined;
    const [qp, kp, v] = projs(n, qkv, layout); // [N, nH*D], [N, nKV*D], [N, nKV*D] (or in `layout`)
    if (parts.attentionNorms) {
      const norms = headNormWeights(g, w, qp.dtype as ComputeDtype, eps); // [D] each
      attn = g.scope("attn", () => attention(layer, qp, kp, v, norms));
    } else {
      const q = headNorm(g, qp, w("self_attn.q_norm"), nH, D, eps, form, parts.headLayout); // [N, nH*D] (or headLayout)
      const k = headNorm(g, kp, w("self_attn.k_norm"), nKV, D, eps, form, parts.headLayout); // [N, nKV*D] (or headLayout)
      attn = g.scope("attn", () => attention(layer, q, k, v));
    }
  } else {
    attn = packedSelfAttention(g, n, layer, parts, attention, form);
  }

  const post = { sum: x, delta: projs(attn, o)[0] }; // h = x + o(attn)
  const { normed: m, sum: h } = addAndNorm(g, post, w("post_attention_layernorm"), eps, form); // [N, H] each
  const [gate, up] = projs(m, gateUp); // [N, I] each
  return { sum: h, delta: projs(swiglu(g, gate, up), down)[0] }; // h + down(…), added by the next norm
}

/** q's and k's per-head norm weights in `dtype`, for an attention that applies them (`attentionNorms`). */
function headNormWeights(
  g: GraphBuilder,
  w: (name: string) => Value,
  dtype: ComputeDtype,
  epsilon: number,
): HeadNormWeights {
  return {
    q: toDtype(g, w("self_attn.q_norm"), dtype),
    k: toDtype(g, w("self_attn.k_norm"), dtype),
    epsilon,
  };
}

/** A layer's attention in the packed form (`PackedAttention`): normed input `n` `[N, H]` → `[N, nH*D]`. */
function packedSelfAttention(
  g: GraphBuilder,
  n: Value,
  layer: number,
  parts: DecoderParts,
  attention: PackedAttention,
  form: NormHow,
): Value {
  const { cfg, weights, lora } = parts;
  const group = QWEN3_LINEAR_GROUPS[0]; // q/k/v
  if (group.some((linear) => lora.pair(layer, linear))) {
    throw new Error("decoder: packed attention takes LoRA in the groups layout, not per Linear");
  }
  const members = [{
    out: (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim,
    lora: undefined,
  }];
  const [qkv] = linearsWithLora(g, n, weights.linears(layer, group), members, lora.group(layer, 0)); // [N, (nH+2nKV)*D]
  const norm = (qk: Value) => packedHeadNorm(g, qk, weights.headNorms(layer), cfg.rms_norm_eps, form); // qk's shape
  return g.scope("attn", () => attention.packed(layer, qkv, norm));
}

/** RMSNorm over each head's D features: `[N, heads*D]` → `[N, heads*D]` (or `layout`). */
function headNorm(
  g: GraphBuilder,
  x: Value,
  weight: Value,
  heads: number,
  D: number,
  eps: number,
  form: NormHow,
  layout?: Value,
): Value {
  const perHead = Reshape.emit(g, x, [0, heads, D]); // [N, heads, D]
  return Reshape.emit(g, norm(g, perHead, weight, eps, form), layout ?? [0, heads * D]); // [N, heads*D]
}

/**
 * q and k normed per head in one kernel: `x` `[B, nH+nKV, T, D]`, the norm with unit weight and then a
 * Mul by each head's weight (`weights` `[nH+nKV, 1, D]`, float32: `GraphWeights.headNorms`), in x's dtype.
 */
function packedHeadNorm(g: GraphBuilder, x: Value, weights: Value, eps: number, how: NormHow): Value {
  const dtype = x.dtype as ComputeDtype;
  const D = x.shape?.at(-1);
  if (typeof D !== "number") throw new Error("decoder: the head dim of the packed head norm is not tracked");
  const normed = SimplifiedLayerNormalization.emit(g, x, unitNormWeight(g, D, dtype), eps, how.stats);
  return Mul.emit(g, normed, toDtype(g, weights, dtype)); // x's shape
}

/** One Linear of a group: its output size (rows of the stacked weight) and adapter. */
export interface LinearMember {
  out: number;
  lora: LoraPairValues | undefined;
}

/**
 * Linears that read the same input (q, k, v; gate, up) as one Gemm over their stacked `[Σout, in]`
 * weight (`GraphWeights.linears`), split after: one pass over x and, backward, one `dX = dY · W` instead
 * of a sum of three. The adapter comes in one of two layouts (lora_inputs.ts): per member (pairs: each
 * adds `scale · (x Aᵀ) Bᵀ`, the scale applied to the rank-r product, cheaper than to the `[N, out]`
 * one), or per group (`x A_gᵀ B_gᵀ` over the whole stacked output, two Gemms). x `[N, in]` → one
 * `[N, out_i]` per member, or with `layout` (the adapter per group only) the stacked output reshaped to it
 * first (`[B, S, Σout]`, say) and split along its last axis. The adapter's float32 inputs are cast to x's
 * dtype.
 */
export function linearsWithLora(
  g: GraphBuilder,
  x: Value,
  stacked: Value,
  members: readonly LinearMember[],
  grouped?: LoraGroupValues,
  layout?: Value | number[],
): Value[] {
  if (layout && members.some((m) => m.lora)) {
    throw new Error("decoder: a Linear group split in another layout takes its adapter per group");
  }
  const dtype = (x.dtype ?? "float32") as ComputeDtype;
  let y = Gemm.emit(g, x, stacked, null, { transB: true }); // [N, Σout]
  if (grouped) {
    const [a, b] = [grouped.a, grouped.b].map((v) => toDtype(g, v, dtype));
    const u = Gemm.emit(g, x, a, null, { transB: true }); // [N, Σr]
    y = Gemm.emit(g, u, b, y, { transB: true }); // [N, Σout]: u Bᵀ + y, one pass
  }
  if (layout) y = Reshape.emit(g, y, layout); // [B, S, Σout]
  const axis = layout ? -1 : 1;
  const parts = members.length === 1 ? [y] : Split.emit(g, y, members.map((m) => m.out), axis); // [N, out_i]
  return parts.map((part, i) => {
    const lora = members[i].lora;
    if (!lora) return part;
    const [a, b, scale] = [lora.a, lora.b, lora.scale].map((v) => toDtype(g, v, dtype));
    const u = Mul.emit(g, Gemm.emit(g, x, a, null, { transB: true }), scale); // [N, r]
    return Gemm.emit(g, u, b, part, { transB: true }); // [N, out_i]: u Bᵀ + part, one pass
  });
}
