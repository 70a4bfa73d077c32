/**
 * The weights of a transformers.js export: a plan (where each float32 tensor goes in the external
 * data file) made from the config alone, then one streaming pass that reads each checkpoint tensor,
 * widens it to float32, merges a LoRA adapter into its Linear (`W' = W + scale · B · A`, PEFT), stores
 * Linears transposed (`[in, out]`, for MatMul) and writes it, so memory holds one tensor at a time.
 *
 * Dimensions: out / in of a Linear, r LoRA rank.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { writeAll } from "../fs/atomic.ts";
import { readTensor } from "../safetensors/mod.ts";
import type { Qwen3Config } from "./hf_config.ts";
import { linearPath, linearShape, type ModelDir, QWEN3_LINEARS, qwen3Weights } from "./model_dir.ts";

/** One LoRA pair in PEFT layout: A `[r, in]`, B `[out, r]`, row-major float32. */
export interface MergePair {
  a: Float32Array;
  aShape: [number, number];
  b: Float32Array;
  bShape: [number, number];
}

/**
 * A LoRA adapter to merge into the exported weights: `W' = W + scale · B · A` for each pair, keyed by
 * module path such as `model.layers.0.self_attn.q_proj` (PEFT semantics; `scale = alpha / r`, or
 * `alpha / sqrt(r)` for rsLoRA, is the caller's choice).
 */
export interface MergeAdapter {
  scale: number;
  pairs: Map<string, MergePair>;
}

/** Where one exported tensor lives in the data file, and how it is stored. */
export interface PlannedTensor {
  /** Hugging Face name, e.g. `model.layers.0.mlp.up_proj.weight`. */
  name: string;
  /** Stored dims: `[in, out]` for Linears (transposed), the checkpoint's dims otherwise. */
  dims: number[];
  /** Stored transposed (the Linears). */
  transposed: boolean;
  /** Byte offset in the data file (aligned) and byte length. */
  offset: number;
  length: number;
}

/** Tensor offsets are multiples of this (a page), so any mmap-based loader can map them directly. */
export const DATA_ALIGNMENT = 4096;

/** Every weight of `cfg` (lm_head only when untied) laid out back to back, float32, aligned. */
export function planWeights(cfg: Qwen3Config): PlannedTensor[] {
  let offset = 0;
  return qwen3Weights(cfg).map((spec) => {
    const transposed = spec.kind === "matrix";
    const dims = transposed ? [spec.shape[1], spec.shape[0]] : [...spec.shape];
    const length = dims.reduce((a, b) => a * b, 1) * 4;
    const planned = { name: spec.name, dims, transposed, offset, length };
    offset = align(offset + length);
    return planned;
  });
}

/** Streams every planned tensor of `model` (with `adapter` merged) into the file `path`. */
export async function writeWeights(
  model: ModelDir,
  plan: readonly PlannedTensor[],
  path: string,
  adapter?: MergeAdapter,
): Promise<void> {
  const file = await Deno.open(path, { write: true, create: true, truncate: true });
  try {
    let written = 0;
    for (const t of plan) {
      const values = await loadMerged(model, t, adapter);
      if (t.offset > written) await writeAll(file, new Uint8Array(t.offset - written));
      await writeAll(file, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
      written = t.offset + t.length;
    }
    await file.sync();
  } finally {
    file.close();
  }
}

/** One tensor as stored in the export: float32, adapter merged, Linears transposed. */
async function loadMerged(model: ModelDir, t: PlannedTensor, adapter?: MergeAdapter): Promise<Float32Array> {
  const loc = model.checkpoint.tensors.get(t.name)!; // checked by openModelDir
  const read = await readTensor(model.checkpoint.headers.get(loc.file)!, t.name, { asFloat32: true });
  const w = read.data as Float32Array;
  if (!t.transposed) return w;
  const [outDim, inDim] = read.shape;
  const pair = adapter?.pairs.get(t.name.slice(0, -".weight".length));
  if (pair) mergeInto(w, outDim, inDim, pair, adapter!.scale);
  return transpose(w, outDim, inDim);
}

/** `w += scale · B · A` in place, each row's update summed in float64 and rounded once. */
export function mergeInto(w: Float32Array, outDim: number, inDim: number, pair: MergePair, scale: number) {
  const r = pair.aShape[0];
  const { a, b } = pair;
  const acc = new Float64Array(inDim); // [in]
  for (let o = 0; o < outDim; o++) {
    acc.fill(0);
    for (let k = 0; k < r; k++) {
      const c = scale * b[o * r + k];
      if (c === 0) continue;
      const ao = k * inDim;
      for (let i = 0; i < inDim; i++) acc[i] += c * a[ao + i];
    }
    const wo = o * inDim;
    for (let i = 0; i < inDim; i++) w[wo + i] += acc[i];
  }
}

/** `[rows, cols]` → `[cols, rows]`, in tiles for cache locality. */
export function transpose(src: Float32Array, rows: number, cols: number): Float32Array {
  const out = new Float32Array(src.length);
  const TILE = 64;
  for (let r0 = 0; r0 < rows; r0 += TILE) {
    const r1 = Math.min(rows, r0 + TILE);
    for (let c0 = 0; c0 < cols; c0 += TILE) {
      const c1 = Math.min(cols, c0 + TILE);
      for (let r = r0; r < r1; r++) {
        for (let c = c0; c < c1; c++) out[c * rows + r] = src[r * cols + c];
      }
    }
  }
  return out;
}

/** Throws a UserError naming the first pair that matches no Linear or has the wrong shape. */
export function checkAdapter(cfg: Qwen3Config, adapter: MergeAdapter | undefined): void {
  if (!adapter) return;
  const what = (key: string) => `merge adapter: pair "${key}"`;
  if (!Number.isFinite(adapter.scale)) {
    throw new UserError("merge adapter: scale", {
      value: adapter.scale,
      why: "it must be a finite number",
      fix: "pass alpha / r (PEFT) or alpha / sqrt(r) (rsLoRA)",
    });
  }
  const shapes = new Map<string, [number, number]>();
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    for (const lin of QWEN3_LINEARS) shapes.set(linearPath(n, lin), linearShape(cfg, lin));
  }
  for (const [key, pair] of adapter.pairs) {
    const shape = shapes.get(key);
    if (!shape) {
      throw new UserError(what(key), {
        why: `it names no Linear of this ${cfg.num_hidden_layers}-layer model`,
        fix: 'key pairs by module path, e.g. "model.layers.0.self_attn.q_proj"',
      });
    }
    const [outDim, inDim] = shape, r = pair.aShape[0];
    const ok = pair.aShape[1] === inDim && pair.bShape[0] === outDim && pair.bShape[1] === r && r > 0 &&
      pair.a.length === r * inDim && pair.b.length === outDim * r;
    if (!ok) {
      throw new UserError(what(key), {
        value: { aShape: pair.aShape, bShape: pair.bShape, aLength: pair.a.length, bLength: pair.b.length },
        why: `the Linear is [${outDim}, ${inDim}], so A must be [r, ${inDim}] and B [${outDim}, r]`,
        fix: "pass A as lora_A.weight and B as lora_B.weight of the same rank, in PEFT layout",
      });
    }
  }
}

function align(n: number): number {
  return Math.ceil(n / DATA_ALIGNMENT) * DATA_ALIGNMENT;
}
