/**
 * Attention for the train graph, made of primitive ops only (every op has a gradient rule): RoPE in
 * the rotate-half form from position ids, grouped-query attention, causal softmax attention. Rows are right-padded sequences: a real token never attends to padding, and
 * padding rows carry zero loss weight.
 *
 * Dimension legend: B rows, T tokens per row, N = B·T, nH / nKV heads, D head dim, P RoPE positions,
 * QT = (nH / nKV)·T stacked queries per key/value head.
 *
 * @module
 */

import type { Dim } from "../onnx/proto.ts";
import type { GraphBuilder, Value } from "../onnx/builder.ts";
import { attention, rope } from "../onnx/compose.ts";
import { OPS } from "../onnx/ops.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import type { AttentionFn } from "../model/graph/decoder.ts";

const { Cast, Concat, Gather, Greater, Range, Reshape, Transpose, Unsqueeze, Where } = OPS;

/** A value with its shape stated where the emitter could not track it (computed reshape targets). */
export function shaped(v: Value, shape: readonly Dim[]): Value {
  return { ...v, shape };
}

/** Score added where a query must not see a key: large and finite, so softmax gradients stay finite. */
const MASKED = -1e9;

/**
 * The causal attention of the train graph. `bt` is the int64 `[2]` shape (B, T) of the token ids,
 * `positions` int64 `[B, T]`, `cos` / `sin` the `[P, D/2]` RoPE tables.
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
): AttentionFn {
  const { num_attention_heads: nH, num_key_value_heads: nKV, head_dim: D } = cfg;
  const rep = nH / nKV;
  const table = (t: Value) => {
    const half = Gather.emit(g, t, positions, 0); // [B, T, D/2], in the tables' dtype (the compute dtype)
    return shaped(Unsqueeze.emit(g, Concat.emit(g, [half, half], -1), [1]), ["B", 1, "T", D]); // [B, 1, T, D]
  };
  const [cosBT, sinBT] = [table(cos), table(sin)];
  const causal = causalBias(g, bt); // [T, T]
  const qt = rep === 1 ? "T" : "QT"; // symbol of the stacked query axis
  const bias = rep === 1 ? causal : shaped(Concat.emit(g, Array(rep).fill(causal), 0), [qt, "T"]); // [rep·T, T]
  const targets = new Map<number, Value>();
  const heads = (x: Value, n: number) => {
    if (!targets.has(n)) targets.set(n, Concat.emit(g, [bt, g.ints([n, D])], 0)); // one shape per head count
    const split = shaped(Reshape.emit(g, x, targets.get(n)!), ["B", "T", n, D]); // [B, T, n, D]
    return Transpose.emit(g, split, [0, 2, 1, 3]); // [B, n, T, D]
  };
  return (_layer, q, k, v) => {
    const qr = rope(g, heads(q, nH), cosBT, sinBT, D); // [B, nH, T, D]
    const stacked = shaped(Reshape.emit(g, qr, [0, nKV, -1, D]), ["B", nKV, qt, D]); // [B, nKV, rep·T, D]
    const kr = rope(g, heads(k, nKV), cosBT, sinBT, D); // [B, nKV, T, D]
    const out = attention(g, stacked, kr, heads(v, nKV), D, { bias }); // [B, nKV, rep·T, D]
    const perHead = shaped(Reshape.emit(g, out, [0, nH, -1, D]), ["B", nH, "T", D]); // [B, nH, T, D]
    const rows = Transpose.emit(g, perHead, [0, 2, 1, 3]); // [B, T, nH, D]
    return shaped(Reshape.emit(g, rows, [-1, nH * D]), ["N", nH * D]); // [N, nH*D]
  };
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
