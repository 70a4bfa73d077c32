/**
 * Measuring helpers for the benchmarks: medians, peak resident memory, the onnxruntime MatMul peak.
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import { GraphBuilder } from "../lib/onnx/builder.ts";
import { OPS } from "../lib/onnx/ops.ts";

/** Median of `values`. */
export function median(values: readonly number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/** Runs `fn` once to warm up, then `repeats` times; returns the median of what each run reports. */
export async function medianOf(repeats: number, fn: () => Promise<number>): Promise<number> {
  await fn();
  const values: number[] = [];
  for (let i = 0; i < repeats; i++) values.push(await fn());
  return median(values);
}

/** Resets the process's peak RSS counter (Linux `clear_refs` 5); false where not allowed. */
export function resetPeakRss(): boolean {
  try {
    Deno.writeTextFileSync("/proc/self/clear_refs", "5");
    return true;
  } catch {
    return false;
  }
}

/** Peak resident memory of this process since start or the last reset, in MiB (Linux VmHWM). */
export function peakRssMiB(): number {
  const status = Deno.readTextFileSync("/proc/self/status");
  const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN);
  return kb / 1024;
}

/** Current resident memory in MiB. */
export function rssMiB(): number {
  return Deno.memoryUsage().rss / (1 << 20);
}

/**
 * onnxruntime's float32 MatMul throughput on this machine: `[m, k] × [k, n]` with a constant B (as
 * model weights are), median of `repeats`, in GFLOP/s.
 */
export async function matmulPeakGflops(
  threads: number,
  m = 512,
  k = 1024,
  n = 3072,
  repeats = 5,
): Promise<number> {
  const g = new GraphBuilder("matmul_peak");
  const a = g.input("a", "float32", [m, k]);
  const b = g.initializer(
    "b",
    Float32Array.from({ length: k * n }, (_, i) => ((i * 7919) % 1000) / 1000 - 0.5),
    [k, n],
  );
  g.output(OPS.MatMul.emit(g, a, b), "c");
  const options: ort.InferenceSession.SessionOptions = threads > 0 ? { intraOpNumThreads: threads } : {};
  const session = await ort.InferenceSession.create(g.toModel(), options);
  const feed = {
    a: new ort.Tensor("float32", Float32Array.from({ length: m * k }, (_, i) => (i % 13) / 13), [m, k]),
  };
  const seconds = await medianOf(repeats, async () => {
    const t = performance.now();
    await session.run(feed);
    return (performance.now() - t) / 1000;
  });
  await session.release();
  return (2 * m * k * n) / seconds / 1e9;
}

/** Milliseconds `fn` takes. */
export async function timeMs(fn: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await fn();
  return performance.now() - t;
}
