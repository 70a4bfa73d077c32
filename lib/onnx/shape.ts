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

/**
 * Shape after Reshape to a known target (numbers or symbolic dims): 0 copies the input dim, and -1 is
 * inferred when the input's dims, numbers and symbols, divide out (`[B, 2, 3, S] → [B, -1, S]` is `6`).
 */
export function reshapeShape(x: Shape, target: readonly Dim[]): Shape {
  const out: Dim[] = target.map((d, i) => (d === 0 && x ? x[i] : d));
  if (out.some((d) => d === undefined || d === 0)) return undefined;
  const hole = out.indexOf(-1);
  if (hole < 0) return out;
  if (!x) return undefined;
  const inferred = divideDims(x, out.filter((_, i) => i !== hole));
  if (inferred === undefined) return undefined;
  out[hole] = inferred;
  return out;
}

/** `product(all) / product(known)` as one dim, when the symbols cancel and the numbers divide. */
function divideDims(all: readonly Dim[], known: readonly Dim[]): Dim | undefined {
  const symbols = all.filter((d) => typeof d === "string") as string[];
  let num = all.reduce<number>((p, d) => (typeof d === "number" ? p * d : p), 1);
  for (const d of known) {
    if (typeof d === "number") num /= d;
    else {
      const at = symbols.indexOf(d);
      if (at < 0) return undefined;
      symbols.splice(at, 1);
    }
  }
  if (!Number.isInteger(num)) return undefined;
  if (symbols.length === 0) return num;
  return symbols.length === 1 && num === 1 ? symbols[0] : undefined;
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

/** Contents of small int64 vectors (shapes, axes, starts) where an emitter knows them. */
const INT_CONTENTS = new WeakMap<object, readonly Dim[]>();

/**
 * Records what a 1-D int64 value holds (numbers, or symbolic dims such as `"B"` from `Shape`), so
 * that Reshape, Expand and ConstantOfShape can track the shape they are given as a computed value.
 */
export function trackInts<V extends object>(value: V, contents: readonly Dim[] | undefined): V {
  if (contents) INT_CONTENTS.set(value, contents);
  return value;
}

/** The tracked contents of an int64 vector (a static list is its own contents). */
export function intsOf(value: object | readonly number[] | null | undefined): readonly Dim[] | undefined {
  if (!value) return undefined;
  return Array.isArray(value) ? value as readonly number[] : INT_CONTENTS.get(value);
}

/** Tracked contents that are all numbers (axes, starts, ends, steps). */
export function numbersOf(
  value: object | readonly number[] | null | undefined,
): readonly number[] | undefined {
  const dims = intsOf(value);
  return dims?.every((d) => typeof d === "number") ? dims as readonly number[] : undefined;
}

/** Elementwise Add/Sub/Mul/Div on tracked int vectors (a length-1 side broadcasts); symbols pass ×1, +0. */
export function intArith(
  op: string,
  a: readonly Dim[] | undefined,
  b: readonly Dim[] | undefined,
): Dim[] | undefined {
  if (!a || !b || (a.length !== b.length && a.length !== 1 && b.length !== 1)) return undefined;
  const out: Dim[] = [];
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const d = intOp(op, a[a.length === 1 ? 0 : i], b[b.length === 1 ? 0 : i]);
    if (d === undefined) return undefined;
    out.push(d);
  }
  return out;
}

function intOp(op: string, x: Dim, y: Dim): Dim | undefined {
  if (typeof x === "number" && typeof y === "number") {
    if (op === "Add") return x + y;
    if (op === "Sub") return x - y;
    if (op === "Mul") return x * y;
    if (op === "Div" && y !== 0) return Math.trunc(x / y);
    return undefined;
  }
  const unit = op === "Mul" || op === "Div" ? 1 : 0;
  if (y === unit && op !== "Sub" || (y === 0 && op === "Sub")) return x;
  if (x === unit && (op === "Mul" || op === "Add")) return y;
  return undefined;
}

/** Largest end that means "to the end of the axis" in practice. */
const TO_END = 2 ** 31;

/** Shape after Slice with static `starts`, `ends`, `axes` (default all), `steps` (default 1). */
export function sliceShape(
  x: Shape,
  starts: readonly number[],
  ends: readonly number[],
  axes?: readonly number[],
  steps?: readonly number[],
): Shape {
  if (!x) return undefined;
  const out: Dim[] = [...x];
  for (let i = 0; i < starts.length; i++) {
    const a = axisOf(axes?.[i] ?? i, x.length);
    const step = steps?.[i] ?? 1;
    const d = x[a];
    if (typeof d === "number") out[a] = sliceCount(d, starts[i], ends[i], step);
    else if (!(starts[i] === 0 && ends[i] >= TO_END && step === 1)) return undefined;
  }
  return out;
}

/** Number of elements `range(start, end, step)` picks from an axis of size `dim` (ONNX clamping). */
export function sliceCount(dim: number, start: number, end: number, step: number): number {
  const lo = step > 0 ? 0 : -1;
  const hi = step > 0 ? dim : dim - 1;
  const clamp = (v: number) => Math.min(hi, Math.max(lo, v < 0 ? v + dim : v));
  const [s, e] = [clamp(start), clamp(end)];
  return Math.max(0, Math.ceil((e - s) / step));
}

/** Shapes of Split into `parts` near-equal pieces (the last one smaller when uneven, as ONNX does). */
export function splitShapes(x: Shape, axis: number, parts: number): Shape[] {
  const d = x?.[axisOf(axis, x.length)];
  if (!x || typeof d !== "number") return Array.from({ length: parts }, () => undefined);
  const chunk = Math.ceil(d / parts);
  return Array.from({ length: parts }, (_, i) => {
    const out = [...x];
    out[axisOf(axis, x.length)] = Math.max(0, Math.min(chunk, d - chunk * i));
    return out;
  });
}

/** Shape after constant Pad with static `pads` ([begins..., ends...] over `axes`, default all). */
export function padShape(x: Shape, pads: readonly number[], axes?: readonly number[]): Shape {
  if (!x) return undefined;
  const list = axes ?? x.map((_, i) => i);
  const out: Dim[] = [...x];
  for (let i = 0; i < list.length; i++) {
    const a = axisOf(list[i], x.length);
    const d = x[a];
    const extra = pads[i] + pads[i + list.length];
    if (typeof d === "number") out[a] = d + extra;
    else if (extra !== 0) return undefined;
  }
  return out;
}

/** Whether two tracked shapes are the same (symbolic dims by name). */
export function sameShape(a: Shape, b: Shape): boolean {
  return !!a && !!b && a.length === b.length && a.every((d, i) => d === b[i]);
}
