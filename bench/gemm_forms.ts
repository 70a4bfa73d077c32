/**
 * GEMM forms on one provider (issue 29, deliverable 3): every matrix product of a model's Linears, in each
 * form the graphs could write it, timed alone. The graphs today write a Linear's forward as Gemm with
 * `transB` against the checkpoint's `[out, in]` matrix, and its input gradient `dX = dY · W` as a plain
 * Gemm (decoder.ts); the alternative is a MatMul against a transposed copy made at load. Which is faster
 * depends on the provider's kernels (on an H200 through WebGPU a Gemm with transposed B ran at 2.1 TFLOP/s
 * where the head's plain forms ran at 6.7 and 22: issue 29), so it is measured here before a graph
 * changes.
 *
 * Products, for each model shape and each row count M (tokens in the call):
 *   - the four Linear groups as the graphs fuse them (q/k/v, o, gate/up, down) and the head, forward
 *     `[M, in] · [out, in]ᵀ` in the forms `gemm_transB` (today's), `matmul` (W pre-transposed) and
 *     `gemm` (W pre-transposed, Gemm); and the input gradient `[M, out] · [out, in]` (`gemm`, today's,
 *     and `matmul`);
 *   - LoRA's thin products of the q/k/v group at rank r: `[M, in] · [3r, in]ᵀ` and `[M, 3r] · [out, 3r]ᵀ`.
 *
 * Every operand is a graph input bound once (in device memory on a GPU provider), the output too, so a
 * run moves no data between host and device. Reported per product and form: the median wall time of
 * `repeats` runs after a warm-up, and where the provider writes GPU timestamps (WebGPU), the median GPU
 * time from a separate profiled run (lib/engine/profiled.ts), with the names of the programs it dispatched
 * (which kernel the provider chose: onnxruntime's WebGPU MatMul and Gemm have subgroup-matrix programs for
 * some GPUs, docs/ENGINE_FACTS.md). TFLOP/s = 2·M·in·out / time.
 *
 *   deno run -A bench/gemm_forms.ts --ep webgpu --compute float16 [--models qwen3-0.6b,qwen3-1.7b|DIR,…]
 *     [--tokens 1,32,4096] [--rank 16] [--repeats 10] [--only qkv,head]
 *
 * Prints one JSON object. On the CPU the inputs are not prepacked (MLAS prepacks constant weights only),
 * so CPU figures say little about the graphs' own; the benchmark is for GPU providers.
 *
 * @module
 */

import { join } from "node:path";
import { parseArgs } from "@std/cli";
import { UserError } from "../lib/errors.ts";
import { GraphBuilder } from "../lib/onnx/builder.ts";
import { OPS } from "../lib/onnx/ops.ts";
import { openEngineSession, type SessionOptions } from "../lib/engine/session.ts";
import type { EngineSession, Feed } from "../lib/engine/engine_session.ts";
import { profiled } from "../lib/engine/profiled.ts";
import { busiestRuns } from "../lib/ort/profile.ts";
import type { ExecutionProvider } from "../lib/ort/providers.ts";
import { WEBGPU_DEFAULTS } from "../lib/config/sections/model.ts";
import type { ComputeDtype } from "../lib/model/graph/forms.ts";
import {
  QWEN3_06B_SHAPE_PRESET,
  QWEN3_17B_SHAPE_PRESET,
  randomQwen3Config,
  TINY_PRESET,
} from "../lib/model/random_model.ts";
import type { Qwen3Config } from "../lib/model/hf_config.ts";
import { median } from "./measure.ts";
import { mulberry32 } from "../lib/data/random.ts";

/** The shape numbers a product list needs (a Qwen3 config's). */
export type LinearShapes = Pick<
  Qwen3Config,
  | "hidden_size"
  | "intermediate_size"
  | "num_attention_heads"
  | "num_key_value_heads"
  | "head_dim"
  | "vocab_size"
>;

/** The built-in shapes (bench.ts's random models). */
export const SHAPES: Record<string, LinearShapes> = {
  tiny: randomQwen3Config(TINY_PRESET),
  "qwen3-0.6b": randomQwen3Config(QWEN3_06B_SHAPE_PRESET),
  "qwen3-1.7b": randomQwen3Config(QWEN3_17B_SHAPE_PRESET),
};

/** How a product is written. */
export type GemmForm = "gemm_transB" | "matmul" | "gemm";

/** One product `[M, k] · [k, n]` (its weight stored as the form needs it). */
export interface Product {
  /** The Linear group or LoRA factor, and the direction. */
  name: string;
  m: number;
  k: number;
  n: number;
  forms: GemmForm[];
}

const FORWARD: GemmForm[] = ["gemm_transB", "matmul", "gemm"];
const INPUT_GRAD: GemmForm[] = ["gemm", "matmul"];

/** The products of one model shape at M rows (`only`: group names to keep, all when empty). */
export function products(s: LinearShapes, m: number, rank: number, only: string[] = []): Product[] {
  const q = s.num_attention_heads * s.head_dim, kv = s.num_key_value_heads * s.head_dim;
  const groups: [string, number, number][] = [
    ["qkv", s.hidden_size, q + 2 * kv],
    ["o", q, s.hidden_size],
    ["gate_up", s.hidden_size, 2 * s.intermediate_size],
    ["down", s.intermediate_size, s.hidden_size],
    ["head", s.hidden_size, s.vocab_size],
  ];
  const list: Product[] = [];
  for (const [group, inDim, outDim] of groups) {
    if (only.length && !only.includes(group)) continue;
    list.push({ name: `${group} forward`, m, k: inDim, n: outDim, forms: FORWARD });
    list.push({ name: `${group} dX`, m, k: outDim, n: inDim, forms: INPUT_GRAD });
  }
  if (!only.length || only.includes("lora")) {
    list.push({ name: "lora A (q/k/v)", m, k: s.hidden_size, n: 3 * rank, forms: FORWARD });
    list.push({ name: "lora B (q/k/v)", m, k: 3 * rank, n: q + 2 * kv, forms: FORWARD });
  }
  return list;
}

/** The one-node graph of `form`: inputs x `[m, k]` and w (`[n, k]` for gemm_transB, else `[k, n]`). */
export function formGraph(p: Product, form: GemmForm, dtype: ComputeDtype): Uint8Array {
  const g = new GraphBuilder(`gemm_${form}`);
  const x = g.input("x", dtype, [p.m, p.k]);
  const w = g.input("w", dtype, form === "gemm_transB" ? [p.n, p.k] : [p.k, p.n]);
  const y = form === "matmul"
    ? OPS.MatMul.emit(g, x, w)
    : OPS.Gemm.emit(g, x, w, null, { transB: form === "gemm_transB" });
  g.output(y, "y");
  return g.toModel();
}

/** Values in ±[1/16, 1/2) in `dtype`: finite products, no subnormals. */
function randomData(dtype: ComputeDtype, length: number, seed: number): Float32Array | Float16Array {
  const rand = mulberry32(seed);
  const value = () => (rand() < 0.5 ? -1 : 1) * (0.0625 + 0.4375 * rand());
  return dtype === "float16" ? Float16Array.from({ length }, value) : Float32Array.from({ length }, value);
}

/** What one form of one product measured. */
export interface FormResult {
  form: GemmForm;
  wallMs: number;
  /** Median GPU time of the product's dispatches per run; null where the provider writes no timestamps. */
  gpuMs: number | null;
  tflops: number;
  /**
   * The provider's programs the product dispatched (their names in the GPU timestamps: a kernel choice the
   * op hides, such as a subgroup-matrix MatMul); null where the provider writes no timestamps.
   */
  programs: string[] | null;
}

/** Times `form` of `p`: median wall ms of `repeats` runs, then GPU ms from a profiled run set. */
async function measureForm(
  p: Product,
  form: GemmForm,
  options: SessionOptions & { compute: ComputeDtype },
  repeats: number,
): Promise<FormResult> {
  const bytes = formGraph(p, form, options.compute);
  const runs = async (session: EngineSession, count: number) => {
    const feeds = feedsFor(session, p, form, options.compute);
    try {
      const wall: number[] = [];
      await session.run(feeds.inputs, feeds.outputs); // warm-up: the provider compiles its program
      for (let i = 0; i < count; i++) {
        const start = performance.now();
        await session.run(feeds.inputs, feeds.outputs);
        wall.push(performance.now() - start);
      }
      return wall;
    } finally {
      feeds.release();
    }
  };
  const session = await openEngineSession(bytes, ".", options);
  let wall: number[];
  try {
    wall = await runs(session, repeats);
  } finally {
    await session.close();
  }
  const traces = await profiled(async () => {
    const traced = await openEngineSession(bytes, ".", options);
    try {
      await runs(traced, Math.min(repeats, 5));
    } finally {
      await traced.close();
    }
  });
  const timed = busiestRuns(traces).slice(1); // past the warm-up
  const gpu = timed.map((r) => r.gpu.reduce((sum, e) => sum + e.dur, 0) / 1000);
  const gpuMs = gpu.some((ms) => ms > 0) ? median(gpu) : null;
  const programs = gpuMs === null ? null : [...new Set(timed.flatMap((r) => r.gpu.map((e) => e.program)))];
  const wallMs = median(wall);
  return { form, wallMs, gpuMs, tflops: (2 * p.m * p.k * p.n) / ((gpuMs ?? wallMs) * 1e9), programs };
}

/** x, w and y for one run set: bound (device memory on a GPU provider) and released after. */
function feedsFor(session: EngineSession, p: Product, form: GemmForm, dtype: ComputeDtype) {
  const host = (data: Float32Array | Float16Array, dims: number[]) =>
    ({ type: dtype, data, dims }) as Parameters<EngineSession["bind"]>[0];
  const wDims = form === "gemm_transB" ? [p.n, p.k] : [p.k, p.n];
  const x = session.bind(host(randomData(dtype, p.m * p.k, 1), [p.m, p.k]));
  const w = session.bind(host(randomData(dtype, p.k * p.n, 2), wDims));
  const out = session.device
    ? session.device.tensor(dtype, [p.m, p.n])
    : host(dtype === "float16" ? new Float16Array(p.m * p.n) : new Float32Array(p.m * p.n), [p.m, p.n]);
  return {
    inputs: { x, w } as Record<string, Feed>,
    outputs: { y: out } as Record<string, Feed>,
    release() {
      x.release();
      w.release();
      if (session.device) (out as { release(): void }).release();
    },
  };
}

/** Options of one benchmark run. */
export interface GemmFormsOptions {
  ep: ExecutionProvider;
  compute: ComputeDtype;
  models: string[];
  tokens: number[];
  rank: number;
  repeats: number;
  only: string[];
}

/** A built-in shape's numbers, or those of the model directory `name` (its config.json). */
export async function shapesOf(name: string): Promise<LinearShapes> {
  if (name in SHAPES) return SHAPES[name];
  try {
    return JSON.parse(await Deno.readTextFile(join(name, "config.json")));
  } catch (e) {
    throw new UserError("gemm_forms: --models", {
      value: name,
      why: `it is neither a built-in shape nor a model directory with a config.json (${
        (e as Error).message
      })`,
      fix: `use ${Object.keys(SHAPES).join(", ")} or a model directory`,
    });
  }
}

/** Every product of every model and row count, each form timed. */
export async function benchGemmForms(o: GemmFormsOptions) {
  const options = {
    ep: o.ep,
    compute: o.compute,
    providerOptions: o.ep === "webgpu" ? { ...WEBGPU_DEFAULTS } : {},
  };
  const rows = [];
  for (const model of o.models) {
    for (const m of o.tokens) {
      for (const p of products(await shapesOf(model), m, o.rank, o.only)) {
        console.error(`gemm forms: ${model} ${p.name} M=${m} (${p.k} → ${p.n}) …`);
        const results: FormResult[] = [];
        for (const form of p.forms) results.push(await measureForm(p, form, options, o.repeats));
        const fastest = results.reduce((a, b) => (b.tflops > a.tflops ? b : a));
        rows.push({ model, ...p, results, fastest: fastest.form });
      }
    }
  }
  return { ep: o.ep, compute: o.compute, rank: o.rank, repeats: o.repeats, rows };
}

if (import.meta.main) {
  const { values } = parseArgs(Deno.args, {
    string: ["ep", "compute", "models", "tokens", "rank", "repeats", "only"],
  });
  const list = (v: unknown, fallback: string) => String(v ?? fallback).split(",").filter(Boolean);
  const models = list(values.models, "qwen3-0.6b,qwen3-1.7b");
  for (const model of models) await shapesOf(model); // a bad name fails before any session opens
  const result = await benchGemmForms({
    ep: (values.ep ?? "webgpu") as ExecutionProvider,
    compute: (values.compute ?? "float16") as ComputeDtype,
    models,
    tokens: list(values.tokens, "1,32,4096").map(Number),
    rank: Number(values.rank ?? 16),
    repeats: Number(values.repeats ?? 10),
    only: list(values.only, ""),
  });
  console.log(JSON.stringify(result));
}
