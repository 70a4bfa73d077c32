/**
 * Attention for the train graph, made of ops with gradient rules: RoPE as one RotaryEmbedding kernel for q
 * and k together (its rule in lib/onnx/ops_contrib.ts), grouped-query attention, causal softmax
 * attention. Rows are right-padded sequences: a real token never attends to padding, and padding rows
 * carry zero loss weight.
 *
 * Dimension legend: B rows, T tokens per row, N = B·T, nH / nKV heads, D head dim, P RoPE positions,
 * QT = (nH / nKV)·T stacked queries per key/value head.
 *
 * @module
 */

import type { Dim } from "../onnx/proto.ts";
import type { GraphBuilder, Value } from "../onnx/builder.ts";
import { attention } from "../onnx/compose.ts";
import { OPS } from "../onnx/ops.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import type { PackedAttention } from "../model/graph/decoder.ts";

const { Cast, Concat, Gather, Greater, Range, Reshape, RotaryEmbedding, Split, Transpose, Unsqueeze, Where } =
  OPS;

/** A value with its shape stated where the emitter could not track it (computed reshape targets). */
export function shaped(v: Value, shape: readonly Dim[]): Value {
  return { ...v, shape };
}

/** Score added where a query must not see a key: large and finite, so softmax gradients stay finite. */
const MASKED = -1e9;

/**
 * The causal attention of the train graph, fed q and k side by side (decoder.ts `PackedAttention`). `bt`
 * is the int64 `[2]` shape (B, T) of the token ids, `positions` int64 `[B, T]`, `cos` / `sin` the
 * `[P, D/2]` RoPE tables (in the compute dtype). q, k and v are laid out by head with one reshape and one
 * transpose, split in two, and q and k normed (the decoder's `norm`) and turned by one RotaryEmbedding
 * kernel (its 4-D form `[B, heads, T, D]`) together, then split.
 *
 * Grouped-query attention without repeating keys and values: the rep = nH / nKV query heads that share
 * a key/value head are stacked along the query axis (`[B, nKV, rep·T, D]`, a free reshape since those
 * heads are adjacent), so each score matrix multiplies the shared keys once and no `[B, nH, T, D]` copy
 * of K or V exists (nor its gradient's reduction). The causal mask is repeated rep times to match.
 */
export function causalAttention(
  g: GraphBuilder,
  cfg: Qwen3Config,
  bt: Value,
  positions: Value,
  cos: Value,
  sin: Value,
): PackedAttention {
  const { num_attention_heads: nH, num_key_value_heads: nKV, head_dim: D } = cfg;
  const rep = nH / nKV;
  const causal = causalBias(g, bt); // [T, T]
  const qt = rep === 1 ? "T" : "QT"; // symbol of the stacked query axis
  const bias = rep === 1 ? causal : shaped(Concat.emit(g, Array(rep).fill(causal), 0), [qt, "T"]); // [rep·T, T]
  const target = Concat.emit(g, [bt, g.ints([-1, D])], 0); // [4]: B, T, -1, D
  const packed = (_layer: number, qkv: Value, norm: (qk: Value) => Value) => {
    const byToken = shaped(Reshape.emit(g, qkv, target), ["B", "T", nH + 2 * nKV, D]); // [B, T, nH+2nKV, D]
    const heads = Transpose.emit(g, byToken, [0, 2, 1, 3]); // [B, nH+2nKV, T, D]
    const [qk, v] = Split.emit(g, heads, [nH + nKV, nKV], 1); // [B, nH+nKV, T, D], [B, nKV, T, D]
    const turned = RotaryEmbedding.emit(g, norm(qk), positions, cos, sin); // [B, nH+nKV, T, D]
    const [q, k] = Split.emit(g, turned, [nH, nKV], 1); // [B, nH, T, D], [B, nKV, T, D]
    const stacked = shaped(Reshape.emit(g, q, [0, nKV, -1, D]), ["B", nKV, qt, D]); // [B, nKV, rep·T, D]
    // q arrives scaled by 1/sqrt(D) (its head-norm weights carry it: GraphWeights.headNorms).
    const out = attention(g, stacked, k, v, D, { bias, scale: 1 }); // [B, nKV, rep·T, D]
    const perHead = shaped(Reshape.emit(g, out, [0, nH, -1, D]), ["B", nH, "T", D]); // [B, nH, T, D]
    const rows = Transpose.emit(g, perHead, [0, 2, 1, 3]); // [B, T, nH, D]
    g.noteReshapeTarget(rows, target); // [B, T, -1, D]: the gradient's way back, no Shape kernel
    return shaped(Reshape.emit(g, rows, [-1, nH * D]), ["N", nH * D]); // [N, nH*D]
  };
  return { packed };
}

/**
 * `[T, T]`: 0 where key j ≤ query i, MASKED above the diagonal. The positions are a float32 Range (exact
 * below 2^24): a GPU provider has no int64 Range kernel and would build the mask on the host.
 */
function causalBias(g: GraphBuilder, bt: Value): Value {
  const t = Cast.emit(g, Gather.emit(g, bt, g.scalar(1, "int64"), 0), "float32"); // []
  const idx = Range.emit(g, g.scalar(0), t, g.scalar(1)); // [T]
  const later = Greater.emit(g, Unsqueeze.emit(g, idx, [0]), Unsqueeze.emit(g, idx, [1])); // [T, T]: j > i
  return shaped(Where.emit(g, later, g.scalar(MASKED), g.scalar(0)), ["T", "T"]); // [T, T]
}
