/**
 * Checks, once per process and head layout, that a GPU provider's GroupQueryAttention gives the CPU
 * provider's result for a call with many new tokens, and returns how many new tokens a call may carry.
 *
 * Why: with onnxruntime 1.30.0 on Mesa's lavapipe (Vulkan on the CPU, what CI runs WebGPU on), a
 * GroupQueryAttention call with 32 or more new tokens is wrong for every query after the eighth (log-prob
 * errors around 1e-2), with or without a past, at any batch size, while calls of up to 31 tokens and
 * every decode step match the CPU to 1e-7 (measured; docs/ENGINE_FACTS.md, "The GPU path"). Whether a
 * real GPU's driver does the same is not known here, so rather than assume either way the engine asks
 * the device: one call of `PROBE_TOKENS` random tokens with the model's own head layout, on the provider
 * and on the CPU. Where they differ, prefills, continuations and scoring run in pieces of at most
 * `SAFE_TOKENS` new tokens (scheduler.ts, engine.ts); where they agree there is no limit. Where the engine
 * has the attention apply the q/k norms (forms.ts `attentionNorms`), the device's probe does too, against
 * the CPU's separate norms (its kernel refuses the norm inputs).
 *
 * @module
 */

import { GraphBuilder, type Value } from "../onnx/builder.ts";
import { OPS } from "../onnx/ops.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { ropeTables } from "../model/graph/rope.ts";
import type { ExecutionProvider, ProviderOptions } from "../ort/providers.ts";
import { OrtSession } from "../ort/session.ts";
import { OrtTensor } from "../ort/value.ts";

/** New tokens in the probe call: the smallest count measured wrong on lavapipe. */
export const PROBE_TOKENS = 32;
/** New tokens per call where the probe fails: the largest count measured right. */
export const SAFE_TOKENS = 31;
/** Largest difference from the CPU accepted (measured right: ≤ 2e-7; wrong: ≥ 1e-2). */
const TOLERANCE = 1e-4;

/** The probe's q/k norm epsilon (Qwen3's). */
const NORM_EPS = 1e-6;

const verdicts = new Map<string, number>();

/**
 * New tokens a GroupQueryAttention call may carry on `ep` for `cfg`'s heads (Infinity: no limit), with
 * the q/k norms inside it where `attentionNorms`. The probe's session opens with `providerOptions`, the
 * engine's own (none of them changes the arithmetic).
 */
export function attentionTokenLimit(
  ep: ExecutionProvider,
  cfg: Qwen3Config,
  providerOptions: ProviderOptions = {},
  attentionNorms = false,
): number {
  if (ep === "cpu") return Infinity;
  const { num_attention_heads: h, num_key_value_heads: kv, head_dim: d } = cfg;
  const key = `${ep}:${h}:${kv}:${d}:${attentionNorms}`;
  let limit = verdicts.get(key);
  if (limit === undefined) {
    const heads = { heads: h, kvHeads: kv, dim: d };
    const [cpu, device] = [
      runProbe("cpu", { ...heads, norms: attentionNorms ? "before" : "none" }, {}),
      runProbe(ep, { ...heads, norms: attentionNorms ? "inside" : "none" }, providerOptions),
    ];
    const worst = cpu.reduce((w, v, i) => Math.max(w, Math.abs(v - device[i])), 0);
    limit = worst <= TOLERANCE ? Infinity : SAFE_TOKENS;
    verdicts.set(key, limit);
  }
  return limit;
}

/** The probe's attention: head counts, head size, and q/k norms none, before it (CPU) or inside it. */
interface ProbeHeads {
  heads: number;
  kvHeads: number;
  dim: number;
  norms: "none" | "before" | "inside";
}

/** One first-prompt GroupQueryAttention call of PROBE_TOKENS tokens on `ep`; returns its output. */
function runProbe(ep: ExecutionProvider, p: ProbeHeads, providerOptions: ProviderOptions): Float32Array {
  const { heads, kvHeads, dim } = p;
  const S = PROBE_TOKENS;
  const g = new GraphBuilder("gqa_probe");
  const rope = ropeTables(dim, 1e6, S);
  // Norm weights other than ones, so that a kernel reading them wrong differs.
  const weight = (at: number) =>
    g.constant(Float32Array.from({ length: dim }, (_, i) => at + i / dim), [dim]);
  const norms = p.norms === "none" ? null : { q: weight(0.5), k: weight(1.5) }; // [D] each
  const normedBefore = (x: Value, w: Value, count: number) =>
    OPS.Reshape.emit(
      g,
      OPS.SimplifiedLayerNormalization.emit(g, OPS.Reshape.emit(g, x, [1, S, count, dim]), w, NORM_EPS),
      [1, S, count * dim],
    ); // [1, S, count*D]
  const [q, k] = [
    g.input("q", "float32", [1, S, heads * dim]),
    g.input("k", "float32", [1, S, kvHeads * dim]),
  ];
  const before = norms && p.norms === "before";
  const inside = norms && p.norms === "inside" ? norms : null;
  const [y, presentKey, presentValue] = OPS.GroupQueryAttention.emit(g, {
    query: before ? normedBefore(q, norms.q, heads) : q,
    key: before ? normedBefore(k, norms.k, kvHeads) : k,
    value: g.input("v", "float32", [1, S, kvHeads * dim]),
    qNormWeight: inside?.q,
    kNormWeight: inside?.k,
    pastKey: g.input("past_key", "float32", [1, kvHeads, 0, dim]),
    pastValue: g.input("past_value", "float32", [1, kvHeads, 0, dim]),
    seqlensK: g.input("seqlens_k", "int32", [1]),
    totalSequenceLength: g.input("total", "int32", []),
    cosCache: g.initializer("cos", rope.cos, [rope.positions, rope.half]),
    sinCache: g.initializer("sin", rope.sin, [rope.positions, rope.half]),
  }, { numHeads: heads, kvNumHeads: kvHeads, doRotary: true, qkNormEpsilon: inside ? NORM_EPS : undefined });
  g.output(y, "y");
  g.output(presentKey, "present_key");
  g.output(presentValue, "present_value");
  const session = OrtSession.create(g.toModel(), {
    providers: [ep],
    providerOptions: { [ep]: providerOptions },
  });
  try {
    const random = uniforms(7);
    const t = (n: number, dims: number[]) =>
      new OrtTensor("float32", Float32Array.from({ length: n }, random), dims);
    const empty = () => new OrtTensor("float32", new Float32Array(0), [1, kvHeads, 0, dim]);
    const out = new Float32Array(S * heads * dim);
    const present = () => new OrtTensor("float32", new Float32Array(kvHeads * S * dim), [1, kvHeads, S, dim]);
    session.run({
      q: t(S * heads * dim, [1, S, heads * dim]),
      k: t(S * kvHeads * dim, [1, S, kvHeads * dim]),
      v: t(S * kvHeads * dim, [1, S, kvHeads * dim]),
      past_key: empty(),
      past_value: empty(),
      seqlens_k: new OrtTensor("int32", Int32Array.of(S - 1), [1]),
      total: new OrtTensor("int32", Int32Array.of(S), []),
    }, {
      y: new OrtTensor("float32", out, [1, S, heads * dim]),
      present_key: present(),
      present_value: present(),
    });
    return out;
  } finally {
    session.release();
  }
}

/** Uniforms in [-1, 1) from a small fixed generator (the probe's inputs only need to be the same twice). */
function uniforms(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 16807) % 2147483647;
    return (s / 2147483647) * 2 - 1;
  };
}
