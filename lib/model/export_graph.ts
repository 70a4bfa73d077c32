/**
 * The decoder graph of a transformers.js export: Qwen3 with a KV cache, in the input/output names
 * transformers.js 4.3.1 (and Hugging Face Optimum) use for a decoder-only model, built from primitive
 * ops only (no contrib ops) so that it also runs on WebGPU and in onnxruntime-web.
 *
 * Dimension legend:
 *   B  batch_size                      T  sequence_length (new tokens this call)
 *   P  past_sequence_length            S  total_sequence_length = P + T
 *   H  hidden_size                     I  intermediate_size
 *   nH query heads   nKV key/value heads   D head_dim   V vocab_size
 *
 * Inputs: `input_ids` int64 [B, T], `attention_mask` int64 [B, S] (1 keep, 0 padding; left padding),
 * `position_ids` int64 [B, T], `past_key_values.{n}.key|value` float32 [B, nKV, P, D].
 * Outputs: `logits` float32 [B, T, V], `present.{n}.key|value` float32 [B, nKV, S, D].
 *
 * Choices: RoPE angles are `position · inv_freq` in float32, as transformers computes them; the mask is
 * causal over absolute column indices (query t sits at column P + t) and-ed with `attention_mask`, then
 * added to the scores as 0 / -1e9 (a fully masked row, a padding query, stays finite); GQA stacks the
 * query heads of each KV group along the query axis instead of `repeatKv`, and the present outputs
 * are the Concat nodes themselves (measured on Qwen3-0.6B's shape at 512 past tokens: repeatKv's
 * Expand and the output Identity copies took ~30% of a decode step); the LM head is a Gemm with
 * `transB` over the `[V, H]` table, so a tied head shares the embedding's bytes. Linears are MatMuls
 * with weights stored `[in, out]`.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../onnx/builder.ts";
import { attention, rmsNorm, rope, swiglu } from "../onnx/compose.ts";
import { bindOps, type BoundOps } from "../onnx/ops.ts";
import type { Qwen3Config } from "./hf_config.ts";
import { linearPath, QWEN3_LINEARS } from "./model_dir.ts";

/** Symbolic dimension names, as Optimum's exports name them (transformers.js resolves `batch_size`). */
export const DIMS = {
  batch: "batch_size",
  seq: "sequence_length",
  past: "past_sequence_length",
  total: "total_sequence_length",
} as const;

/** Additive mask value for dropped keys: exp underflows to 0, and a fully masked row stays finite. */
const MASKED = -1e9;

/** Where each weight lives: an ONNX initializer made by the caller (external data). */
export type WeightLookup = (hfName: string) => Value;

/** Names of the cache inputs and outputs of layer `n`. */
export function cacheNames(n: number): { pastKey: string; pastValue: string; key: string; value: string } {
  return {
    pastKey: `past_key_values.${n}.key`,
    pastValue: `past_key_values.${n}.value`,
    key: `present.${n}.key`,
    value: `present.${n}.value`,
  };
}

/** Builds the decoder graph into `g`; `weight` returns the initializer of a Hugging Face tensor name. */
export function buildDecoderGraph(g: GraphBuilder, cfg: Qwen3Config, weight: WeightLookup): void {
  const o = bindOps(g);
  const { batch: B, seq: T, past: P, total: S } = DIMS;
  const nKV = cfg.num_key_value_heads, D = cfg.head_dim, V = cfg.vocab_size;
  const rep = cfg.num_attention_heads / nKV;
  const ids = g.input("input_ids", "int64", [B, T]);
  const mask = g.input("attention_mask", "int64", [B, S]);
  const positions = g.input("position_ids", "int64", [B, T]);
  const past = Array.from({ length: cfg.num_hidden_layers }, (_, n) => ({
    key: g.input(cacheNames(n).pastKey, "float32", [B, nKV, P, D]),
    value: g.input(cacheNames(n).pastValue, "float32", [B, nKV, P, D]),
  }));

  const [cos, sin] = g.scope("rope", () => ropeTables(g, o, positions, cfg)); // [B, 1, T, D] each
  const bias = g.scope("mask", () => groupBias(o, attentionBias(g, o, ids, mask), rep)); // [B, 1, rep*T, S]
  let x = o.Gather(weight("model.embed_tokens.weight"), ids, 0); // [B, T, H]
  const present: { key: Value; value: Value }[] = [];
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    const layer = (build: () => Value[]) => g.scope(`layers.${n}`, build);
    const [q, kNew, vNew] = layer(() => attentionInputs(g, o, cfg, n, x, { cos, sin }, weight));
    const key = presentConcat(g, past[n].key, kNew, cacheNames(n).key); // [B, nKV, S, D]
    const value = presentConcat(g, past[n].value, vNew, cacheNames(n).value); // [B, nKV, S, D]
    present.push({ key, value });
    [x] = layer(() => [attentionAndMlp(g, o, cfg, n, { x, q, key, value, bias }, weight)]); // [B, T, H]
  }
  const h = rmsNorm(g, x, weight("model.norm.weight"), cfg.rms_norm_eps); // [B, T, H]
  const head = weight(cfg.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight"); // [V, H]
  g.output(lmHead(g, o, h, head, cfg), "logits", [B, T, V]);
  present.forEach((kv, n) => {
    g.output(kv.key, cacheNames(n).key, [B, nKV, S, D]);
    g.output(kv.value, cacheNames(n).value, [B, nKV, S, D]);
  });
}

/**
 * `[past, new]` along the sequence axis, its node and value named `name` (outside any scope), so the
 * graph output is the Concat itself: an output under another name would cost an Identity copy of
 * the whole cache per layer and step.
 */
function presentConcat(g: GraphBuilder, past: Value, fresh: Value, name: string): Value {
  return g.op("Concat", [past, fresh], { axis: 2 }, { name }); // [B, nKV, S, D]
}

/** cos and sin of `position · inv_freq`, both halves repeated: [B, 1, T, D] each. */
function ropeTables(g: GraphBuilder, o: BoundOps, positions: Value, cfg: Qwen3Config): [Value, Value] {
  const D = cfg.head_dim;
  const invFreq = Array.from({ length: D / 2 }, (_, i) => 1 / Math.pow(cfg.rope_theta, (2 * i) / D));
  const pos = o.Unsqueeze(o.Cast(positions, "float32"), [2]); // [B, T, 1]
  const freqs = o.Mul(pos, g.vector(invFreq)); // [B, T, D/2]
  const angles = o.Unsqueeze(o.Concat([freqs, freqs], -1), [1]); // [B, 1, T, D]
  return [o.Cos(angles), o.Sin(angles)]; // [B, 1, T, D] each
}

/**
 * 0 where query t may attend key column s, else -1e9: causal over columns (`s <= P + t`) and-ed with
 * `attention_mask[b, s] != 0`. Indices are float32 Ranges (WebGPU has no int64 Range kernel) and the
 * two conditions meet in nested Wheres (And is not in onnxruntime-web 1.31's WebGPU operator table).
 */
function attentionBias(g: GraphBuilder, o: BoundOps, ids: Value, mask: Value): Value {
  const total = o.Cast(o.Squeeze(o.Shape(mask, 1, 2), [0]), "float32"); // [] S
  const fresh = o.Cast(o.Squeeze(o.Shape(ids, 1, 2), [0]), "float32"); // [] T
  const pastLen = o.Sub(total, fresh); // [] P
  const keyCols = o.Unsqueeze(o.Range(g.scalar(0), total, g.scalar(1)), [0]); // [1, S]
  const queryCols = o.Unsqueeze(o.Range(pastLen, total, g.scalar(1)), [1]); // [T, 1]
  const causal = o.LessOrEqual(keyCols, queryCols); // [T, S]
  const keep = o.Unsqueeze(o.Greater(mask, g.scalar(0, "int64")), [1, 2]); // [B, 1, 1, S]
  return o.Where(causal, o.Where(keep, 0, MASKED), MASKED); // [B, 1, T, S]
}

/**
 * The bias repeated for each query head of a KV group, stacked as the queries are in
 * `attentionAndMlp` (row r·T + t): [B, 1, T, S] → [B, 1, rep*T, S], once per call.
 */
function groupBias(o: BoundOps, bias: Value, rep: number): Value {
  return rep === 1 ? bias : o.Concat(Array(rep).fill(bias), 2); // [B, 1, rep*T, S]
}

/** Query, new key and new value of layer `n`: normed per head, RoPE applied to q and k. */
function attentionInputs(
  g: GraphBuilder,
  o: BoundOps,
  cfg: Qwen3Config,
  n: number,
  x: Value,
  rot: { cos: Value; sin: Value },
  weight: WeightLookup,
): Value[] {
  const p = `model.layers.${n}`;
  const eps = cfg.rms_norm_eps, D = cfg.head_dim;
  const heads = (v: Value, count: number) => o.Reshape(v, [0, 0, count, D]); // [B, T, count, D]
  const toBHTD = (v: Value) => o.Transpose(v, [0, 2, 1, 3]); // [B, count, T, D]
  const h = rmsNorm(g, x, weight(`${p}.input_layernorm.weight`), eps); // [B, T, H]
  const qh = heads(linear(o, h, n, "q_proj", weight), cfg.num_attention_heads); // [B, T, nH, D]
  const kh = heads(linear(o, h, n, "k_proj", weight), cfg.num_key_value_heads); // [B, T, nKV, D]
  const vh = heads(linear(o, h, n, "v_proj", weight), cfg.num_key_value_heads); // [B, T, nKV, D]
  const q = rmsNorm(g, qh, weight(`${p}.self_attn.q_norm.weight`), eps); // [B, T, nH, D]
  const k = rmsNorm(g, kh, weight(`${p}.self_attn.k_norm.weight`), eps); // [B, T, nKV, D]
  return [
    rope(g, toBHTD(q), rot.cos, rot.sin, D), // [B, nH, T, D]
    rope(g, toBHTD(k), rot.cos, rot.sin, D), // [B, nKV, T, D]
    toBHTD(vh), // [B, nKV, T, D]
  ];
}

/**
 * Grouped-query attention over the full cache, then o_proj, the residual and the MLP. Query head
 * `kv·rep + r` reads KV head `kv` (as HF `repeat_kv`); instead of repeating K and V, the `rep` query
 * heads of a group are stacked along the query axis, [B, nH, T, D] → [B, nKV, rep*T, D], a free reshape.
 */
function attentionAndMlp(
  g: GraphBuilder,
  o: BoundOps,
  cfg: Qwen3Config,
  n: number,
  t: { x: Value; q: Value; key: Value; value: Value; bias: Value },
  weight: WeightLookup,
): Value {
  const p = `model.layers.${n}`;
  const D = cfg.head_dim, nH = cfg.num_attention_heads, nKV = cfg.num_key_value_heads;
  const grouped = o.Reshape(t.q, [0, nKV, -1, D]); // [B, nKV, rep*T, D]
  const a = attention(g, grouped, t.key, t.value, D, { bias: t.bias }); // [B, nKV, rep*T, D]
  const heads = o.Reshape(a, [0, nH, -1, D]); // [B, nH, T, D]
  const merged = o.Reshape(o.Transpose(heads, [0, 2, 1, 3]), [0, 0, nH * D]); // [B, T, nH*D]
  const x1 = o.Add(t.x, linear(o, merged, n, "o_proj", weight)); // [B, T, H]
  const m = rmsNorm(g, x1, weight(`${p}.post_attention_layernorm.weight`), cfg.rms_norm_eps); // [B, T, H]
  const gated = swiglu(g, linear(o, m, n, "gate_proj", weight), linear(o, m, n, "up_proj", weight)); // [B, T, I]
  return o.Add(x1, linear(o, gated, n, "down_proj", weight)); // [B, T, H]
}

/** `x @ W` with W stored `[in, out]`: [..., in] → [..., out]. */
function linear(o: BoundOps, x: Value, n: number, name: typeof QWEN3_LINEARS[number], weight: WeightLookup) {
  return o.MatMul(x, weight(`${linearPath(n, name)}.weight`));
}

/** `h @ headᵀ` as a Gemm over the flattened tokens: [B, T, H] → [B, T, V]. */
function lmHead(g: GraphBuilder, o: BoundOps, h: Value, head: Value, cfg: Qwen3Config): Value {
  const flat = o.Reshape(h, [-1, cfg.hidden_size]); // [B*T, H]
  const logits = o.Gemm(flat, head, null, { transB: true }); // [B*T, V]
  const shape = o.Concat([o.Shape(h, 0, 2), g.ints([cfg.vocab_size])], 0); // [3]
  return o.Reshape(logits, shape); // [B, T, V]
}
