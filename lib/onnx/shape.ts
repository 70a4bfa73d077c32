/**
 * Best-effort static shape tracking for emitters. Every function returns `undefined` when it cannot
 * tell (an unknown input shape, two different symbolic dims), never a guess: onnxruntime's own shape
 * inference is the authority, and graph outputs only carry dims their caller states explicitly.
 */

import type { Dim } from "./proto.ts";

/** A tracked shape, or `undefined` when unknown. */
export type Shape = readonly Dim[] | undefined;

/** Numpy-style broadcast of several shapes; throws on two different fixed sizes (neither 1). */
export function broadcast(...shapes: Shape[]): Shape {
  if (shapes.some((s) => s === undefined)) return undefined;
  const all = shapes as (readonly Dim[])[];
  const rank = Math.max(...all.map((s) => s.length));
  const out: Dim[] = [];
  for (let i = 0; i < rank; i++) {
    const dims = all.map((s) => s[s.length - rank + i]).filter((d) => d !== undefined && d !== 1);
    const fixed = [...new Set(dims.filter((d) => typeof d === "number"))];
    const named = [...new Set(dims.filter((d) => typeof d === "string"))];
    if (fixed.length > 1) throw new Error(`cannot broadcast shapes ${all.map(show).join(" and ")}`);
    if (fixed.length === 1) out.push(fixed[0]);
    else if (named.length === 0) out.push(1);
    else if (named.length === 1) out.push(named[0]);
    else return undefined;
  }
  return out;
}

/** Output shape of MatMul (numpy matmul semantics, batch dims broadcast). */
export function matmulShape(a: Shape, b: Shape): Shape {
  if (!a || !b || a.length === 0 || b.length === 0) return undefined;
  const left = a.length === 1 ? [1, a[0]] : a;
  const right = b.length === 1 ? [b[0], 1] : b;
  const batch = broadcast(left.slice(0, -2), right.slice(0, -2));
  if (!batch) return undefined;
  const out = [...batch, left[left.length - 2], right[right.length - 1]];
  if (a.length === 1) out.splice(out.length - 2, 1);
  if (b.length === 1) out.splice(out.length - 1, 1);
  return out;
}

/** Shape after Transpose with `perm` (default: reversed axes). */
export function transposeShape(x: Shape, perm?: readonly number[]): Shape {
  if (!x) return undefined;
  const p = perm ?? x.map((_, i) => x.length - 1 - i);
  return p.map((i) => x[i]);
}

/** Normalizes a possibly negative axis against `rank`. */
export function axisOf(axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) throw new Error(`axis ${axis} is out of range for rank ${rank}`);
  return a;
}

/** Shape after reducing `axes` (all axes when empty). */
export function reduceShape(x: Shape, axes: readonly number[] | undefined, keepdims: boolean): Shape {
  if (!x || axes === undefined) return undefined;
  const set = new Set(axes.length === 0 ? x.map((_, i) => i) : axes.map((a) => axisOf(a, x.length)));
  const out: Dim[] = [];
  x.forEach((d, i) => {
    if (!set.has(i)) out.push(d);
    else if (keepdims) out.push(1);
  });
  return out;
}

/** Shape after Unsqueeze with static `axes` (interpreted against the output rank). */
export function unsqueezeShape(x: Shape, axes: readonly number[]): Shape {
  if (!x) return undefined;
  const rank = x.length + axes.length;
  const set = new Set(axes.map((a) => axisOf(a, rank)));
  const out: Dim[] = [];
  let j = 0;
  for (let i = 0; i < rank; i++) out.push(set.has(i) ? 1 : x[j++]);
  return out;
}

/** Shape after Squeeze with static `axes`. */
export function squeezeShape(x: Shape, axes: readonly number[]): Shape {
  if (!x) return undefined;
  const set = new Set(axes.map((a) => axisOf(a, x.length)));
  return x.filter((_, i) => !set.has(i));
}

/** Shape after Reshape to a static target: 0 copies the input dim, -1 is inferred when all are fixed. */
export function reshapeShape(x: Shape, target: readonly number[]): Shape {
  const out: Dim[] = target.map((d, i) => (d === 0 && x ? x[i] : d));
  if (out.some((d) => d === undefined || d === 0)) return undefined;
  const hole = out.indexOf(-1);
  if (hole < 0) return out;
  if (!x || x.some((d) => typeof d !== "number") || out.some((d) => typeof d !== "number")) return undefined;
  const total = (x as number[]).reduce((a, b) => a * b, 1);
  const known = (out as number[]).reduce((a, b) => (b === -1 ? a : a * b), 1);
  out[hole] = total / known;
  return out;
}

/** Shape after Concat along `axis`; the axis dim is a number only when all parts are fixed there. */
export function concatShape(parts: Shape[], axis: number): Shape {
  if (parts.some((p) => !p)) return undefined;
  const all = parts as (readonly Dim[])[];
  const a = axisOf(axis, all[0].length);
  const sizes = all.map((p) => p[a]);
  const out = [...all[0]];
  out[a] = sizes.every((d) => typeof d === "number") ? (sizes as number[]).reduce((x, y) => x + y, 0) : "";
  return out[a] === "" ? undefined : out;
}

/** Shape after Gather along `axis`: data dims around the axis, indices dims in its place. */
export function gatherShape(data: Shape, indices: Shape, axis: number): Shape {
  if (!data || !indices) return undefined;
  const a = axisOf(axis, data.length);
  return [...data.slice(0, a), ...indices, ...data.slice(a + 1)];
}

function show(s: readonly Dim[]): string {
  return `[${s.join(", ")}]`;
}
