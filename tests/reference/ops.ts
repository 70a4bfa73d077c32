/**
 * Float64 building blocks of the Qwen3 reference: Linear, RMSNorm, RoPE, SiLU, log-softmax.
 *
 * Dimensions: T rows (tokens, or tokens × heads), `inDim` / `outDim` features, D head dim, V vocab.
 * Activations are flat row-major Float64Arrays.
 *
 * @module
 */

import type { FloatData } from "./types.ts";

/** `y[t, o] = Σ_i x[t, i] · w[o, i]`: a bias-free Linear with `w` in `[out, in]` layout. */
export function linear(
  x: Float64Array,
  rows: number,
  w: FloatData,
  outDim: number,
  inDim: number,
): Float64Array {
  const y = new Float64Array(rows * outDim); // [T, out]
  for (let t = 0; t < rows; t++) {
    const xo = t * inDim;
    for (let o = 0; o < outDim; o++) {
      const wo = o * inDim;
      let s = 0;
      for (let i = 0; i < inDim; i++) s += x[xo + i] * w[wo + i];
      y[t * outDim + o] = s;
    }
  }
  return y;
}

/** RMSNorm of each row: `y = x / sqrt(mean(x²) + eps) * w`. x `[rows, dim]`, w `[dim]`. */
export function rmsNorm(x: Float64Array, rows: number, dim: number, w: FloatData, eps: number): Float64Array {
  const y = new Float64Array(rows * dim); // [rows, dim]
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[o + i] * x[o + i];
    const inv = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) y[o + i] = w[i] * (x[o + i] * inv);
  }
  return y;
}

/** RoPE inverse frequencies `theta^(-2i/D)`, i = 0..D/2-1 (Hugging Face default rope type). */
export function ropeInvFreq(headDim: number, theta: number): Float64Array {
  const half = headDim / 2;
  const f = new Float64Array(half); // [D/2]
  for (let i = 0; i < half; i++) f[i] = 1 / Math.pow(theta, (2 * i) / headDim);
  return f;
}

/**
 * Non-interleaved ("rotate_half") RoPE of one head vector, in place:
 * `x' = x · cos + rotate_half(x) · sin` with `rotate_half([a, b]) = [-b, a]` and the angle of both
 * halves' element i equal to `pos · invFreq[i]`.
 */
export function ropeInPlace(
  x: Float64Array,
  offset: number,
  headDim: number,
  pos: number,
  invFreq: Float64Array,
) {
  const half = headDim / 2;
  for (let i = 0; i < half; i++) {
    const angle = pos * invFreq[i];
    const c = Math.cos(angle), s = Math.sin(angle);
    const a = x[offset + i], b = x[offset + half + i];
    x[offset + i] = a * c - b * s;
    x[offset + half + i] = b * c + a * s;
  }
}

/** RoPE of a single head vector at `pos`, returning a new array (for tests). */
export function rope(vec: ArrayLike<number>, pos: number, theta: number): Float64Array {
  const out = Float64Array.from(vec); // [D]
  ropeInPlace(out, 0, out.length, pos, ropeInvFreq(out.length, theta));
  return out;
}

/** SwiGLU: `silu(g) · u` element-wise, with `silu(g) = g / (1 + exp(-g))`. */
export function swiglu(g: Float64Array, u: Float64Array): Float64Array {
  const y = new Float64Array(g.length); // [T, I]
  for (let i = 0; i < g.length; i++) y[i] = (g[i] / (1 + Math.exp(-g[i]))) * u[i];
  return y;
}

/** `a + b` element-wise (residual connection). */
export function add(a: Float64Array, b: Float64Array): Float64Array {
  const y = new Float64Array(a.length); // [T, H]
  for (let i = 0; i < a.length; i++) y[i] = a[i] + b[i];
  return y;
}

/** `log Σ exp(z[off + v] / temperature)` over v < n, max-shifted. */
export function logSumExp(z: Float64Array, off: number, n: number, temperature: number): number {
  let m = -Infinity;
  for (let v = 0; v < n; v++) m = Math.max(m, z[off + v] / temperature);
  let s = 0;
  for (let v = 0; v < n; v++) s += Math.exp(z[off + v] / temperature - m);
  return m + Math.log(s);
}

/** Log-softmax of `z[off .. off + n) / temperature` as a new array. */
export function logSoftmax(z: Float64Array, off: number, n: number, temperature: number): Float64Array {
  const lse = logSumExp(z, off, n, temperature);
  const y = new Float64Array(n); // [V]
  for (let v = 0; v < n; v++) y[v] = z[off + v] / temperature - lse;
  return y;
}

/** Index of the largest entry; ties go to the lowest index. */
export function argmax(z: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < z.length; i++) if (z[i] > z[best]) best = i;
  return best;
}
