/**
 * `deno task bench --only gpu` (bench.ts): per model, our train step at each `bench.gpu_train_tokens` size
 * and decode at each `bench.gpu_batches` size on the GPU provider (bench/gpu_bench.ts, its own process),
 * and PyTorch with transformers and peft on the same GPU in the same run (bench/peer_torch_gpu.py, on the
 * batches our side wrote), with the ratio; and the Markdown tables: one train row per size, one decode row
 * per batch, and the diagnosis — kernels, host ms and GPU ms of one decode step and of one train
 * micro-batch run, with the op types that took the most host time, read from onnxruntime's profile
 * (gpu_bench.ts says how; GPU ms is "–" where the provider writes no GPU timestamps).
 *
 * The device: the NVIDIA GPU's name (nvidia-smi) where there is one, else the Vulkan adapter Deno's own
 * WebGPU sees (on CI, Mesa's lavapipe). MFU needs the GPU's dense peak for the compute dtype:
 * `bench.gpu_peak_tflops`, or the table below by name.
 *
 * @module
 */

// deno-lint-ignore-file no-explicit-any -- results are JSON from the benchmark processes

import { join } from "node:path";
import { fixedOrDash as f } from "./report.ts";

/** The settings this section reads (bench.ts's `bench` config section). */
export interface GpuSettings {
  gpu_batches: number[];
  prompt_tokens: number;
  decode_tokens: number;
  repeats: number;
  gpu_ep: "webgpu" | "cuda";
  gpu_compute: "float32" | "float16";
  gpu_train_tokens: number[];
  gpu_peak_tflops: number | null;
  gpu_gemm_tokens: number[];
  gpu_long_cache: number;
}

/** Dense peak TFLOP/s by GPU name (NVIDIA's data sheets): float16/bfloat16 tensor cores, and float32. */
const PEAKS: { match: RegExp; float16: number; float32: number }[] = [
  { match: /H200/, float16: 989.4, float32: 66.9 },
  { match: /H100.*PCIe/, float16: 756.5, float32: 51.2 },
  { match: /H100.*NVL/, float16: 835.5, float32: 60.0 },
  { match: /H100/, float16: 989.4, float32: 66.9 },
  { match: /A100/, float16: 312.0, float32: 19.5 },
];

interface Helpers {
  runJson(cmd: string, args: string[]): Promise<Record<string, unknown> | { error: string }>;
  denoScript(script: string, args: string[]): Promise<Record<string, unknown> | { error: string }>;
  /** The repository root and the bench's output folder. */
  ROOT: string;
  OUT: string;
}

/** The GPU this run measures, and its peak for `compute` where known. */
export async function gpuDevice(b: GpuSettings): Promise<{ name: string; peakTflops: number | null }> {
  const smi = await nvidiaName();
  const adapter = smi ? null : await navigator.gpu?.requestAdapter().catch(() => null);
  const name = smi || adapter?.info.description || "unknown device";
  const known = PEAKS.find((p) => p.match.test(name));
  return { name, peakTflops: b.gpu_peak_tflops ?? (known ? known[b.gpu_compute] : null) };
}

/** The first NVIDIA GPU's name, from nvidia-smi ("" where there is none). */
async function nvidiaName(): Promise<string> {
  try {
    const args = ["--query-gpu=name", "--format=csv,noheader"];
    const out = await new Deno.Command("nvidia-smi", { args, stdout: "piped", stderr: "null" }).output();
    return new TextDecoder().decode(out.stdout).split("\n")[0].trim();
  } catch {
    return ""; // no nvidia-smi
  }
}

/** What is not measured yet in a section `onPart` saves before its end. */
const NOT_REACHED = { error: "not reached: the run stopped before it" };

/**
 * Ours, then PyTorch's, then the GEMM forms, on one model; `onPart` is given the section so far after
 * each (the bench saves it, so a run stopped for time keeps what it measured).
 */
export async function gpuSection(
  name: string,
  dir: string,
  b: GpuSettings,
  h: Helpers,
  onPart: (section: Record<string, unknown>) => Promise<void> = () => Promise.resolve(),
) {
  const device = await gpuDevice(b);
  const batchPrefix = join(h.OUT, `gpu-batch-${name.replace(/[^\w.-]/g, "_")}`);
  console.error(`gpu (${b.gpu_ep}, ${b.gpu_compute}, ${device.name}): ${name} …`);
  const ours = await h.denoScript("gpu_bench.ts", [
    `--model=${dir}`,
    `--ep=${b.gpu_ep}`,
    `--compute=${b.gpu_compute}`,
    `--batches=${b.gpu_batches.join(",")}`,
    `--prompt=${b.prompt_tokens}`,
    `--decode=${b.decode_tokens}`,
    `--train-tokens=${b.gpu_train_tokens.join(",")}`,
    `--repeats=${b.repeats}`,
    `--batch-prefix=${batchPrefix}`,
    `--long-cache=${b.gpu_long_cache}`,
    ...(device.peakTflops ? [`--peak-tflops=${device.peakTflops}`] : []),
  ]);
  const settings = { ep: b.gpu_ep, compute: b.gpu_compute };
  const gemmPending = b.gpu_gemm_tokens.length === 0 ? null : NOT_REACHED;
  await onPart({ device, settings, ours, peer: NOT_REACHED, gemm: gemmPending });
  console.error(`PyTorch (transformers + peft): ${name} …`);
  const peer = await h.runJson("python3", [
    join(h.ROOT, "bench", "peer_torch_gpu.py"),
    `--model=${dir}`,
    ...b.gpu_train_tokens.map((tokens) => `--batch=${batchPrefix}-${tokens}.json`),
    `--dtype=${b.gpu_compute}`,
    `--batches=${b.gpu_batches.join(",")}`,
    `--prompt=${b.prompt_tokens}`,
    `--decode=${b.decode_tokens}`,
    `--steps=${b.repeats}`,
  ]).catch((e) => ({ error: String(e) }));
  if (gemmPending) await onPart({ device, settings, ours, peer, gemm: gemmPending });
  const gemm = gemmPending && await gemmForms(dir, b, h);
  return { device, settings, ours, peer, gemm };
}

/** The model's matrix products in each GEMM form (bench/gemm_forms.ts), at `bench.gpu_gemm_tokens` rows. */
function gemmForms(dir: string, b: GpuSettings, h: Helpers) {
  console.error(`gemm forms (${b.gpu_ep}, ${b.gpu_compute}): ${dir} …`);
  return h.denoScript("gemm_forms.ts", [
    `--models=${dir}`,
    `--ep=${b.gpu_ep}`,
    `--compute=${b.gpu_compute}`,
    `--tokens=${b.gpu_gemm_tokens.join(",")}`,
  ]);
}

const pct = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "–");
const ratio = (a: unknown, b: unknown) =>
  typeof a === "number" && typeof b === "number" && b > 0 ? `${(a / b).toFixed(2)}×` : "–";

/** Train, decode and profile tables of one model, ours beside PyTorch's. */
export function gpuTables(
  name: string,
  r: { device: any; settings: any; ours: any; peer: any; gemm?: any } | undefined,
): string[] {
  if (!r) return [];
  const head = `### GPU, ${name}: ${r.settings.ep}, ${r.settings.compute}, on ${r.device.name}`;
  if (r.ours.error) return [head, "", `ours failed: ${r.ours.error}`, ""];
  const peer = r.peer.error ? null : r.peer;
  const peak = r.device.peakTflops;
  const versions = peer
    ? `torch ${peer.torch_version}, transformers ${peer.transformers_version}, peft ${peer.peft_version}`
    : `unavailable (${r.peer.error})`;
  return [
    head,
    "",
    `${r.ours.params.toLocaleString("en")} parameters; MFU against ${
      peak ? `${peak} TFLOP/s` : "an unknown peak"
    }; PyTorch: ${versions}.`,
    "",
    ...trainTable(name, r.ours.train, peer?.train, peak),
    "",
    ...decodeTable(
      r.ours.decode,
      { main: r.ours.decode_main_graph, captured: r.ours.decode_captured },
      peer?.decode,
    ),
    "",
    ...longCacheLine(r.ours.decode_long_cache),
    ...profileTable(r.ours.profile),
    "",
    ...gemmTable(r.gemm),
  ];
}

/**
 * One row per product and row count: each form's TFLOP/s (from GPU time where the provider writes it,
 * else wall time) and the fastest (bench/gemm_forms.ts).
 */
export function gemmTable(gemm: any): string[] {
  if (!gemm) return [];
  if (gemm.error) return [`GEMM forms not measured: ${gemm.error}`, ""];
  const timed = gemm.rows.some((r: any) => r.results.some((x: any) => x.gpuMs !== null)) ? "GPU" : "wall";
  return [
    `GEMM forms (bench/gemm_forms.ts; ${gemm.compute}, TFLOP/s from ${timed} time, median of ${gemm.repeats}): ` +
    "gemm_transB is Gemm against the checkpoint's [out, in] matrix (the graphs' forward today), matmul and " +
    "gemm take a pre-transposed copy; a dX row is the input gradient, [M, out] · [out, in].",
    "",
    "| product | M | in → out | TFLOP/s by form | fastest |",
    "| --- | ---: | --- | --- | --- |",
    ...gemm.rows.map((r: any) =>
      line([
        r.name,
        r.m,
        `${r.k} → ${r.n}`,
        r.results.map((x: any) => `${x.form} ${f(x.tflops, 2)}${programsNote(x.programs)}`).join(", "),
        r.fastest,
      ])
    ),
    "",
  ];
}

/** ` (Program, …)`: the GPU programs a form dispatched (bench/gemm_forms.ts), or nothing where unknown. */
function programsNote(programs: string[] | null | undefined): string {
  return programs?.length ? ` (${programs.join(", ")})` : "";
}

/** A Markdown table row. */
const line = (cells: unknown[]) => `| ${cells.join(" | ")} |`;

/** One row per train size. */
function trainTable(name: string, ours: any[], peer: any[] | undefined, peak: number | null): string[] {
  const mfu = (tflops: unknown) => (peak && typeof tflops === "number" ? tflops / peak : null);
  return [
    "| LoRA r16 train step | tokens | s/step | tok/s | TFLOP/s (4N) | MFU | log-probs pass s | PyTorch tok/s | PyTorch MFU | ratio |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...ours.map((t) => {
      const p = peer?.find((x) => x.tokens_per_step === t.tokens_per_step);
      return line([
        name,
        t.tokens_per_step,
        f(t.seconds_per_step, 3),
        f(t.tok_per_s),
        f(t.tflops_4n, 3),
        pct(mfu(t.tflops_4n)),
        passCell(t),
        f(p?.tok_per_s),
        pct(mfu(p?.tflops_4n)),
        ratio(t.tok_per_s, p?.tok_per_s),
      ]);
    }),
  ];
}

/** The log-probs pass's seconds, "(whole)" where it ran forward and backward; "–" in older records. */
function passCell(t: { logprobs_pass_seconds?: number; forward_alone?: boolean }): string {
  const s = f(t.logprobs_pass_seconds, 3);
  return t.forward_alone === false ? `${s} (whole)` : s;
}

/** Decode rows measured another way (WebGPU), null where not measured, `{ error }` where it failed. */
type OtherDecode = any[] | { error: string } | null | undefined;

/**
 * One row per decode batch: ours as the policy decodes by default; on WebGPU also with every step on the
 * main graph (`model.webgpu.decode_graph` false) and under graph capture, where measured (null elsewhere,
 * and "–" in records from before they were); and PyTorch's.
 */
function decodeTable(
  ours: any[],
  other: { main: OtherDecode; captured: OtherDecode },
  peer: any[] | undefined,
) {
  const rowsOf = (x: OtherDecode) => (Array.isArray(x) ? x : []);
  const failure = (x: OtherDecode, what: string) =>
    x && !Array.isArray(x) ? [`${what} decode failed: ${x.error}`, ""] : [];
  return [
    ...failure(other.main, "main-graph"),
    ...failure(other.captured, "graph-captured"),
    "| decode batch | tok/s | TFLOP/s (2N) | main-graph tok/s | default / main | graph-captured tok/s | " +
    "captured / default | PyTorch `generate` tok/s | ratio |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...ours.map((d) => {
      const p = peer?.find((x) => x.batch === d.batch);
      const m = rowsOf(other.main).find((x) => x.batch === d.batch);
      const c = rowsOf(other.captured).find((x) => x.batch === d.batch);
      const tokPerS = d.decode_tok_per_s;
      return line([
        d.batch,
        f(tokPerS),
        f(d.decode_tflops_2n, 3),
        f(m?.decode_tok_per_s),
        ratio(tokPerS, m?.decode_tok_per_s),
        f(c?.decode_tok_per_s),
        ratio(c?.decode_tok_per_s, tokPerS),
        f(p?.decode_tok_per_s),
        ratio(tokPerS, p?.decode_tok_per_s),
      ]);
    }),
  ];
}

/**
 * The long-cache decode row (gpu_bench.ts `decodeLongCache`) as a sentence: its rate beside the same batch's
 * in a tight cache; nothing where it was not measured (`bench.gpu_long_cache` 0, or an older record).
 */
function longCacheLine(long: any): string[] {
  if (!long) return [];
  if (long.error) return [`Decode in a long cache failed: ${long.error}`, ""];
  return [
    `Decode at batch ${long.batch} in a ${long.capacity.toLocaleString("en")}-position cache ` +
    `(\`bench.gpu_long_cache\`; the rows above: a cache just large enough): ${
      f(long.decode_tok_per_s)
    } tok/s, ` +
    `${ratio(long.decode_tok_per_s, long.tight_decode_tok_per_s)} the tight cache's.`,
    "",
  ];
}

/** The diagnosis: kernels and time of one decode step and one train micro-batch run (gpu_bench.ts). */
function profileTable(profile: any): string[] {
  if (!profile) return [];
  const row = (what: string, p: any) =>
    p.error ? line([what, `profile failed: ${p.error}`, "", "", "", "", ""]) : line([
      what,
      p.kernels,
      p.gpu_dispatches ?? "–",
      f(p.run_ms, 2),
      f(p.host_ms, 2),
      f(p.gpu_ms, 2),
      topOps(p.top_ops),
    ]);
  return [
    "onnxruntime's profile of one decode step and one train micro-batch run, measured apart from the timed " +
    "runs (host ms: the kernels' own time on the host; GPU ms: the provider's GPU timestamps, – where it " +
    "writes none):",
    "",
    "| profiled run | kernels | GPU dispatches | run ms | host ms | GPU ms | top ops: host ms (GPU ms) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    row(`decode step, batch ${profile.decode_step.batch}`, profile.decode_step),
    row(`train micro-batch, ${profile.train_run.tokens} tokens`, profile.train_run),
  ];
}

/** `op ×kernels: host ms (GPU ms)`, for each listed op type. */
function topOps(ops: any[]): string {
  return ops.map((o) =>
    `${o.op} ×${o.kernels}: ${f(o.host_ms, 2)}${o.gpu_ms === null ? "" : ` (${f(o.gpu_ms, 2)})`}`
  )
    .join("; ");
}
