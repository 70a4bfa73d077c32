/**
 * Causal grouped-query attention in float64.
 *
 * Dimensions: T tokens, nH query heads, nKV key/value heads, D head dim. Query head h reads
 * key/value head `floor(h / (nH / nKV))`, as Hugging Face's `repeat_kv` does.
 *
 * @module
 */

/** Shape of an attention call. */
export interface AttentionDims {
  T: number;
  nH: number;
  nKV: number;
  D: number;
}

/**
 * `softmax(q kᵀ / sqrt(D) + causal mask) v` per head.
 * q `[T, nH*D]`, k and v `[T, nKV*D]` (rows are tokens, heads contiguous) → `[T, nH*D]`.
 */
export function causalAttention(
  q: Float64Array,
  k: Float64Array,
  v: Float64Array,
  { T, nH, nKV, D }: AttentionDims,
): Float64Array {
  const out = new Float64Array(T * nH * D); // [T, nH*D]
  const p = new Float64Array(T); // [T] scores of one query row
  const scale = 1 / Math.sqrt(D);
  const group = nH / nKV;
  for (let h = 0; h < nH; h++) {
    const kvh = Math.floor(h / group);
    for (let t = 0; t < T; t++) {
      const qo = (t * nH + h) * D;
      let m = -Infinity;
      for (let s = 0; s <= t; s++) {
        const ko = (s * nKV + kvh) * D;
        let dot = 0;
        for (let i = 0; i < D; i++) dot += q[qo + i] * k[ko + i];
        p[s] = dot * scale;
        m = Math.max(m, p[s]);
      }
      let sum = 0;
      for (let s = 0; s <= t; s++) {
        p[s] = Math.exp(p[s] - m);
        sum += p[s];
      }
      for (let s = 0; s <= t; s++) {
        const w = p[s] / sum, vo = (s * nKV + kvh) * D;
        for (let i = 0; i < D; i++) out[qo + i] += w * v[vo + i];
      }
    }
  }
  return out;
}
