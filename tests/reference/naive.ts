/**
 * A second, deliberately different Qwen3 for cross-checking the reference on tiny models: nested
 * `number[][]` matrices, one token at a time with a growing key/value list, RoPE as complex
 * multiplication, `repeat_kv` by explicit copying. Slow; only for vocab and hidden in the tens.
 *
 * Dimensions: V vocab, H hidden, nH / nKV heads, D head dim.
 *
 * @module
 */

import type { Qwen3Config, RefTensor } from "./types.ts";

type Vec = number[];
type Mat = number[][];

const rows = (t: RefTensor): Mat =>
  Array.from(
    { length: t.shape[0] },
    (_, o) => Array.from(t.data.subarray(o * t.shape[1], (o + 1) * t.shape[1])),
  );
const mv = (w: Mat, x: Vec): Vec => w.map((row) => row.reduce((s, wi, i) => s + wi * x[i], 0));
const norm = (x: Vec, w: ArrayLike<number>, eps: number): Vec => {
  const r = Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + eps);
  return x.map((v, i) => (v / r) * w[i]);
};
const chunks = (x: Vec, d: number): Mat =>
  Array.from({ length: x.length / d }, (_, j) => x.slice(j * d, (j + 1) * d));

/** RoPE as complex rotation of the pairs (x[i], x[i + D/2]) by angle `pos · exp(-ln(theta) · 2i / D)`. */
export function naiveRope(x: Vec, pos: number, theta: number): Vec {
  const half = x.length / 2;
  const out = [...x];
  for (let i = 0; i < half; i++) {
    const ang = pos * Math.exp(-Math.log(theta) * (2 * i) / x.length);
    const [re, im] = [x[i], x[i + half]];
    out[i] = re * Math.cos(ang) - im * Math.sin(ang);
    out[i + half] = im * Math.cos(ang) + re * Math.sin(ang);
  }
  return out;
}

/** Logits `[T][V]` of a Qwen3 given merged HF weights (no LoRA). */
export function naiveLogits(cfg: Qwen3Config, w: Map<string, RefTensor>, seq: number[]): Mat {
  const get = (n: string) => w.get(n)!;
  const eps = cfg.rms_norm_eps, D = cfg.head_dim, nH = cfg.num_attention_heads, nKV = cfg.num_key_value_heads;
  const emb = rows(get("model.embed_tokens.weight"));
  const head = cfg.tie_word_embeddings ? emb : rows(get("lm_head.weight"));
  const caches: { keys: Mat[]; values: Mat[] }[] = [];
  for (let l = 0; l < cfg.num_hidden_layers; l++) caches.push({ keys: [], values: [] });
  return seq.map((tok, pos) => {
    let x = [...emb[tok]];
    for (let l = 0; l < cfg.num_hidden_layers; l++) {
      const p = `model.layers.${l}`;
      const W = (m: string) => rows(get(`${p}.${m}.weight`));
      const n = norm(x, get(`${p}.input_layernorm.weight`).data, eps);
      const rot = (v: Vec, nw: string) =>
        naiveRope(norm(v, get(`${p}.self_attn.${nw}.weight`).data, eps), pos, cfg.rope_theta);
      const qs = chunks(mv(W("self_attn.q_proj"), n), D).map((q) => rot(q, "q_norm"));
      const ks = chunks(mv(W("self_attn.k_proj"), n), D).map((k) => rot(k, "k_norm"));
      const vs = chunks(mv(W("self_attn.v_proj"), n), D);
      const rep = <T>(a: T[]) => Array.from({ length: nH }, (_, h) => a[Math.floor((h * nKV) / nH)]);
      caches[l].keys.push(rep(ks));
      caches[l].values.push(rep(vs));
      const attn = qs.flatMap((q, h) => {
        const sc = caches[l].keys.map((k) => k[h].reduce((s, kv, i) => s + kv * q[i], 0) / Math.sqrt(D));
        const e = sc.map((s) => Math.exp(s - Math.max(...sc)));
        const z = e.reduce((a, b) => a + b, 0);
        return Array.from(
          { length: D },
          (_, i) => caches[l].values.reduce((s, v, j) => s + (e[j] / z) * v[h][i], 0),
        );
      });
      x = mv(W("self_attn.o_proj"), attn).map((v, i) => v + x[i]);
      const m = norm(x, get(`${p}.post_attention_layernorm.weight`).data, eps);
      const g = mv(W("mlp.gate_proj"), m), u = mv(W("mlp.up_proj"), m);
      const act = g.map((gi, i) => gi * u[i] / (1 + Math.exp(-gi)));
      x = mv(W("mlp.down_proj"), act).map((v, i) => v + x[i]);
    }
    return mv(head, norm(x, get("model.norm.weight").data, eps));
  });
}
