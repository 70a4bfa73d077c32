/**
 * Gradient checks against central finite differences, run through onnxruntime (CPU).
 *
 * `checkGrad` builds the forward graph twice: once alone, to evaluate `L = Σ seed · y` at perturbed
 * inputs, and once followed by `backward`, to read the analytic gradients. The seed is fixed
 * pseudo-random noise, so every output entry is weighted differently.
 *
 * @module
 */

import assert from "node:assert/strict";
import * as ort from "onnxruntime-node";
import { backward, type BackwardOptions } from "../../lib/onnx/autodiff.ts";
import { GraphBuilder, type Value } from "../../lib/onnx/builder.ts";
import type { Dim } from "../../lib/onnx/proto.ts";

/** A graph input of a check: its data and run-time dims, the declared dims (may be symbolic). */
export interface CheckInput {
  data: number[];
  dims: number[];
  /** Dims declared to the builder (default `dims`), e.g. `["B", 3]`. */
  decl?: Dim[];
  /** Fed but not differentiated (a frozen weight). */
  frozen?: boolean;
}

/** Options of `checkGrad`. */
export interface CheckOptions {
  /** Graph dtype: float64 (default, tight tolerances) or float32 (ops without double kernels). */
  dtype?: "float64" | "float32";
  /** Finite-difference step (default 1e-6 for float64, 1e-2 for float32). */
  eps?: number;
  /** Allowed |analytic - numeric| / max(1, |numeric|) (default 1e-6 for float64, 2e-3 for float32). */
  tol?: number;
  /** Options of the reverse walk (e.g. `readsNormStats`). */
  backward?: BackwardOptions;
}

type Build = (g: GraphBuilder, x: Record<string, Value>) => Value;

/** Deterministic values in (-1, 1), different for each seed. */
export function noise(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => Math.sin(seed * 12.9898 + i * 78.233 + 0.5) * 0.999);
}

/** A `CheckInput` of noise scaled by `scale`. */
export function rand(dims: number[], seed: number, scale = 1, decl?: Dim[]): CheckInput {
  return { data: noise(dims.reduce((a, b) => a * b, 1), seed).map((v) => v * scale), dims, decl };
}

function tensor(dtype: "float64" | "float32", data: number[], dims: readonly number[]): ort.Tensor {
  return new ort.Tensor(dtype, dtype === "float64" ? Float64Array.from(data) : Float32Array.from(data), dims);
}

function declare(g: GraphBuilder, inputs: Record<string, CheckInput>, dtype: string): Record<string, Value> {
  const out: Record<string, Value> = {};
  for (const [name, x] of Object.entries(inputs)) {
    out[name] = g.input(name, dtype as "float64", x.decl ?? x.dims);
  }
  return out;
}

/**
 * Basic graph optimizations only: at the extended level onnxruntime fuses `x * sigmoid(x)` into
 * com.microsoft QuickGelu, which has no float64 kernel, and these checks are about the math.
 */
const SESSION: ort.InferenceSession.SessionOptions = { graphOptimizationLevel: "basic" };

/** Outputs of a model, run once. */
export async function runModel(
  g: GraphBuilder,
  feeds: Record<string, ort.Tensor>,
): Promise<Record<string, ort.Tensor>> {
  const session = await ort.InferenceSession.create(g.toModel(), SESSION);
  try {
    return await session.run(feeds);
  } finally {
    await session.release();
  }
}

/** Asserts that `backward` through `build` matches central finite differences for every non-frozen input. */
export async function checkGrad(
  inputs: Record<string, CheckInput>,
  build: Build,
  options: CheckOptions = {},
): Promise<void> {
  const dtype = options.dtype ?? "float64";
  const eps = options.eps ?? (dtype === "float64" ? 1e-6 : 1e-2);
  const tol = options.tol ?? (dtype === "float64" ? 1e-6 : 2e-3);
  const feeds = (over: Record<string, number[]> = {}) =>
    Object.fromEntries(
      Object.entries(inputs).map(([n, x]) => [n, tensor(dtype, over[n] ?? x.data, x.dims)]),
    );
  const fg = new GraphBuilder("forward");
  fg.output(build(fg, declare(fg, inputs, dtype)), "y");
  const session = await ort.InferenceSession.create(fg.toModel(), SESSION);
  try {
    const base = (await session.run(feeds())).y;
    const seed = noise(base.data.length, 7);
    const loss = async (over: Record<string, number[]>) => {
      const y = (await session.run(feeds(over))).y.data as ArrayLike<number>;
      let sum = 0;
      for (let i = 0; i < y.length; i++) sum += y[i] * seed[i];
      return sum;
    };
    const seedTensor = tensor(dtype, seed, base.dims);
    const analytic = await gradients(inputs, build, dtype, feeds(), seedTensor, options.backward);
    for (const [name, grad] of Object.entries(analytic)) {
      const x = inputs[name];
      for (let k = 0; k < x.data.length; k++) {
        const plus = x.data.slice();
        const minus = x.data.slice();
        plus[k] += eps;
        minus[k] -= eps;
        const numeric = ((await loss({ [name]: plus })) - (await loss({ [name]: minus }))) / (2 * eps);
        const err = Math.abs(grad[k] - numeric) / Math.max(1, Math.abs(numeric));
        assert.ok(err <= tol, `d/d${name}[${k}]: analytic ${grad[k]} vs numeric ${numeric} (error ${err})`);
      }
    }
  } finally {
    await session.release();
  }
}

/** Runs forward + backward once and returns each non-frozen input's gradient (dims checked). */
async function gradients(
  inputs: Record<string, CheckInput>,
  build: Build,
  dtype: "float64" | "float32",
  feeds: Record<string, ort.Tensor>,
  seed: ort.Tensor,
  walk: BackwardOptions = {},
): Promise<Record<string, number[]>> {
  const g = new GraphBuilder("backward");
  const xs = declare(g, inputs, dtype);
  const y = build(g, xs);
  const names = Object.keys(inputs).filter((n) => !inputs[n].frozen);
  const grads = backward(
    g,
    [{ value: y, grad: g.input("seed", dtype, seed.dims) }],
    names.map((n) => xs[n]),
    walk,
  );
  grads.forEach((d, i) => {
    assert.ok(d, `no gradient for ${names[i]}`);
    g.output(d, `grad_${names[i]}`);
  });
  const out = await runModel(g, { ...feeds, seed });
  return Object.fromEntries(names.map((n) => {
    assert.deepEqual(out[`grad_${n}`].dims, inputs[n].dims, `gradient of ${n} has its input's dims`);
    return [n, Array.from(out[`grad_${n}`].data as Float64Array, Number)];
  }));
}
