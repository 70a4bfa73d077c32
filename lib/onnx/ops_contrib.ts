/**
 * Op table, `com.microsoft` contrib ops: GroupQueryAttention (causal attention with a KV cache that may
 * be a pre-allocated buffer shared between past and present; generation only, no gradient rule: the
 * train graph composes attention from primitive ops) and RotaryEmbedding (RoPE in one kernel, in both
 * graphs). These are fused ops — documented exceptions to "few primitive ops".
 *
 * RotaryEmbedding's gradient: RoPE turns each pair (x_i, x_{i+D/2}) by the angle of its position, an
 * orthogonal map, so its transpose turns by the opposite angle: `dx = RotaryEmbedding(dy)` with the sin
 * table negated (a Neg of a constant table, folded when the session loads). compose.ts `rope` is the
 * primitive form it replaces (six kernels forward per tensor, more backward).
 */

import { attr, type GraphBuilder, type Value } from "./builder.ts";
import { gradOps, intAttr, outGrad } from "./grad_util.ts";
import { check, def, type GradContext } from "./op_def.ts";

/** Contrib domain name. */
export const MS_DOMAIN = "com.microsoft";

/** Inputs of GroupQueryAttention, by name (ONNX Runtime's order is applied by the emitter). */
export interface GqaInputs {
  /** `[B, S, H*D]`, or packed QKV `[B, S, (H + 2*Hkv)*D]` with key and value left out. */
  query: Value;
  /** `[B, S, Hkv*D]`. */
  key?: Value;
  /** `[B, S, Hkv*D]`. */
  value?: Value;
  /** `[B, Hkv, P, D]`: past length P, or the max length when past and present share a buffer. */
  pastKey?: Value;
  pastValue?: Value;
  /** int32 `[B]`: total length (past + new) of each sequence, minus one. */
  seqlensK: Value;
  /** int32 scalar: the batch's maximum total length. */
  totalSequenceLength: Value;
  /** `[maxLen, D/2]` RoPE tables (with `doRotary`). */
  cosCache?: Value;
  sinCache?: Value;
  /** int64 `[B, S]` positions for RoPE. */
  positionIds?: Value;
  /** `[B or 1, H or 1, S, total]`, added to the scores. */
  attentionBias?: Value;
  /** `[H]` per-head sink logits. */
  headSink?: Value;
  /**
   * `[D]` RMSNorm weights applied to each head of the query and of the new key before RoPE (both or
   * neither; `qkNormEpsilon`). onnxruntime 1.30's WebGPU kernel takes them (CUDA's too, says the CPU
   * kernel's refusal; not tried here); its CPU kernel refuses them at run time.
   */
  qNormWeight?: Value;
  kNormWeight?: Value;
}

/** Attributes of GroupQueryAttention. */
export interface GqaOptions {
  numHeads: number;
  kvNumHeads: number;
  /** Score scale, default `1/sqrt(D)`. */
  scale?: number;
  /** Sliding window (left), -1 = none. */
  localWindowSize?: number;
  /** Apply RoPE inside the op from `cosCache` / `sinCache`. */
  doRotary?: boolean;
  rotaryInterleaved?: boolean;
  softcap?: number;
  smoothSoftmax?: boolean;
  /** Epsilon of the q/k norms (`qNormWeight`, `kNormWeight`). */
  qkNormEpsilon?: number;
}

/** onnxruntime's input slots by name; null: slots this project leaves empty (12 and 13). */
const GQA_ORDER: readonly (keyof GqaInputs | null)[] = [
  "query",
  "key",
  "value",
  "pastKey",
  "pastValue",
  "seqlensK",
  "totalSequenceLength",
  "cosCache",
  "sinCache",
  "positionIds",
  "attentionBias",
  "headSink",
  null,
  null,
  "qNormWeight",
  "kNormWeight",
];

/** Causal grouped-query attention with KV cache: `[output, presentKey, presentValue]`. */
function groupQueryAttention(g: GraphBuilder, inputs: GqaInputs, o: GqaOptions): [Value, Value, Value] {
  check(o.numHeads % o.kvNumHeads === 0, "GroupQueryAttention", "numHeads must be a multiple of kvNumHeads");
  const hidden = inputs.key ? inputs.query.shape?.at(-1) : undefined;
  if (typeof hidden === "number") {
    // Measured: onnxruntime 1.30's CPU kernel rejects other head sizes at run time.
    check(
      (hidden / o.numHeads) % 8 === 0,
      "GroupQueryAttention",
      `head size ${hidden / o.numHeads} is not a multiple of 8`,
    );
  }
  const hasCaches = inputs.cosCache !== undefined && inputs.sinCache !== undefined;
  check(!o.doRotary || hasCaches, "GroupQueryAttention", "doRotary needs cosCache and sinCache");
  check(
    (inputs.qNormWeight === undefined) === (inputs.kNormWeight === undefined),
    "GroupQueryAttention",
    "qNormWeight and kNormWeight go together",
  );
  const list = GQA_ORDER.map((k) => (k === null ? null : inputs[k] ?? null));
  while (list[list.length - 1] === null) list.pop();
  const attrs = {
    num_heads: attr.int(o.numHeads),
    kv_num_heads: attr.int(o.kvNumHeads),
    scale: o.scale === undefined ? undefined : attr.float(o.scale),
    local_window_size: attr.int(o.localWindowSize ?? -1),
    do_rotary: attr.int(o.doRotary ? 1 : 0),
    rotary_interleaved: attr.int(o.rotaryInterleaved ? 1 : 0),
    softcap: o.softcap === undefined ? undefined : attr.float(o.softcap),
    smooth_softmax: o.smoothSoftmax ? attr.int(1) : undefined,
    qk_norm_epsilon: o.qkNormEpsilon === undefined ? undefined : attr.float(o.qkNormEpsilon),
  };
  const dtype = inputs.query.dtype;
  const [out, k, v] = g.opN("GroupQueryAttention", list, 3, attrs, {
    domain: MS_DOMAIN,
    dtype: [dtype, dtype, dtype],
  });
  return [out, k, v];
}

/** Attributes of RotaryEmbedding. */
export interface RotaryOptions {
  /** Pairs are (2i, 2i+1) rather than (i, i + D/2) (Qwen3 uses the latter: false). */
  interleaved?: boolean;
  /** Needed with a 3-D input `[B, S, H*D]` when only part of each head is rotated. */
  numHeads?: number;
  rotaryEmbeddingDim?: number;
}

/** RoPE on `[B, S, H*D]` or `[B, H, S, D]` with int64 `positionIds` `[B, S]` and `[maxLen, D/2]` tables. */
function rotaryEmbedding(
  g: GraphBuilder,
  x: Value,
  positionIds: Value,
  cos: Value,
  sin: Value,
  o: RotaryOptions = {},
): Value {
  const attrs = {
    interleaved: attr.int(o.interleaved ? 1 : 0),
    num_heads: o.numHeads === undefined ? undefined : attr.int(o.numHeads),
    rotary_embedding_dim: o.rotaryEmbeddingDim === undefined ? undefined : attr.int(o.rotaryEmbeddingDim),
  };
  return g.op("RotaryEmbedding", [x, positionIds, cos, sin], attrs, { domain: MS_DOMAIN, shape: x.shape });
}

/** dx = RoPE of dy by the opposite angles (sin negated); the positions and tables carry no gradient. */
function rotaryEmbeddingGrad(ctx: GradContext): (Value | null)[] {
  const [, positionIds, cos, sin] = ctx.node.inputs as Value[];
  const optional = (name: string) => (name in ctx.node.attrs ? intAttr(ctx.node, name, 0) : undefined);
  const o: RotaryOptions = {
    interleaved: intAttr(ctx.node, "interleaved", 0) === 1,
    numHeads: optional("num_heads"),
    rotaryEmbeddingDim: optional("rotary_embedding_dim"),
  };
  const back = rotaryEmbedding(ctx.g, outGrad(ctx), positionIds, cos, gradOps(ctx.g).Neg(sin), o);
  return [ctx.wants[0] ? back : null, null, null, null];
}

/** Contrib ops (domain `com.microsoft`, version 1). */
export const CONTRIB_OPS = {
  GroupQueryAttention: def("GroupQueryAttention", groupQueryAttention, { domain: MS_DOMAIN }),
  RotaryEmbedding: def("RotaryEmbedding", rotaryEmbedding, {
    domain: MS_DOMAIN,
    grad: rotaryEmbeddingGrad,
    nondiff: [1, 2, 3],
  }),
};
