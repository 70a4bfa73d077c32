/**
 * RoPE tables for Qwen3 (rotate-half convention): angle(p, i) = p · θ^(-2i/D) for i < D/2.
 *
 * Angles are computed in float64 and rounded once to float32. (Transformers rounds the inverse
 * frequencies and the angles to float32 first: a difference of about 1e-7 · p radians, well inside
 * our tolerances at the context lengths we train on.)
 *
 * @module
 */

/** `cos` and `sin` tables, each `[positions, D/2]` row-major float32. */
export interface RopeTables {
  cos: Float32Array;
  sin: Float32Array;
  positions: number;
  half: number;
}

/** Tables for positions `0 .. positions-1` of a head dim `headDim` and base `theta`. */
export function ropeTables(headDim: number, theta: number, positions: number): RopeTables {
  const half = headDim / 2;
  const cos = new Float32Array(positions * half);
  const sin = new Float32Array(positions * half);
  const invFreq = Array.from({ length: half }, (_, i) => theta ** (-(2 * i) / headDim));
  for (let p = 0; p < positions; p++) {
    for (let i = 0; i < half; i++) {
      const angle = p * invFreq[i];
      cos[p * half + i] = Math.cos(angle);
      sin[p * half + i] = Math.sin(angle);
    }
  }
  return { cos, sin, positions, half };
}
