/**
 * The LM head and log-softmax, computed only for the rows that are needed. The head weight is
 * streamed once per call; log-probs use an online (running-max) log-sum-exp, so no `[T, V]` array
 * exists when only log-probs are asked for.
 *
 * Dimensions: T tokens, C rows asked for, H hidden, V vocab.
 *
 * @module
 */

import type { FloatData } from "./types.ts";

/** Copies the asked-for rows of h `[T, H]` into one `[C, H]` block. */
function gatherRows(h: Float64Array, rows: number[], H: number): Float64Array {
  const out = new Float64Array(rows.length * H); // [C, H]
  rows.forEach((r, c) => out.set(h.subarray(r * H, (r + 1) * H), c * H));
  return out;
}

/** `z[c] = hc[c] · head[v]` for every row c of hc `[C, H]`, four rows per pass over `head[v]`. */
function dotsWithVocabRow(hc: Float64Array, head: FloatData, v: number, H: number, z: Float64Array) {
  const wo = v * H;
  let c = 0;
  for (; c + 4 <= z.length; c += 4) {
    const h0 = c * H, h1 = h0 + H, h2 = h1 + H, h3 = h2 + H;
    let s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (let i = 0; i < H; i++) {
      const w = head[wo + i];
      s0 += hc[h0 + i] * w;
      s1 += hc[h1 + i] * w;
      s2 += hc[h2 + i] * w;
      s3 += hc[h3 + i] * w;
    }
    z[c] = s0;
    z[c + 1] = s1;
    z[c + 2] = s2;
    z[c + 3] = s3;
  }
  for (; c < z.length; c++) {
    let s = 0;
    for (let i = 0; i < H; i++) s += hc[c * H + i] * head[wo + i];
    z[c] = s;
  }
}

/** Logits of the asked-for rows: `out[c, v] = h[rows[c]] · head[v]`; h `[T, H]`, head `[V, H]` → `[C, V]`. */
export function headLogits(
  h: Float64Array,
  rows: number[],
  head: FloatData,
  H: number,
  V: number,
): Float64Array {
  const C = rows.length;
  const hc = gatherRows(h, rows, H); // [C, H]
  const z = new Float64Array(rows.length); // [C]
  const out = new Float64Array(C * V); // [C, V]
  for (let v = 0; v < V; v++) {
    dotsWithVocabRow(hc, head, v, H, z);
    for (let c = 0; c < C; c++) out[c * V + v] = z[c];
  }
  return out;
}

/**
 * `log_softmax(logits[rows[c]] / temperature)[targets[c]]` for every c, with a running max and a
 * rescaled running sum per row (max-shifted, float64). h `[T, H]` → `[C]`.
 */
export function targetLogprobs(
  h: Float64Array,
  rows: number[],
  targets: number[],
  head: FloatData,
  dims: { H: number; V: number; temperature: number },
): Float64Array {
  const { H, V, temperature } = dims;
  const C = rows.length;
  const hc = gatherRows(h, rows, H); // [C, H]
  const z = new Float64Array(rows.length); // [C]
  const max = new Float64Array(C).fill(-Infinity); // [C]
  const sum = new Float64Array(C); // [C] Σ exp(x - max)
  const picked = new Float64Array(C); // [C] target logit / temperature
  for (let v = 0; v < V; v++) {
    dotsWithVocabRow(hc, head, v, H, z);
    for (let c = 0; c < C; c++) {
      const x = z[c] / temperature;
      if (x > max[c]) {
        sum[c] = sum[c] * Math.exp(max[c] - x) + 1;
        max[c] = x;
      } else sum[c] += Math.exp(x - max[c]);
      if (targets[c] === v) picked[c] = x;
    }
  }
  return picked.map((x, c) => x - (max[c] + Math.log(sum[c]))); // [C]
}
