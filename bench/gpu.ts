/**
 * `deno task bench --only gpu` (bench.ts): per model, our train step and decode on the GPU provider
 * (bench/gpu_bench.ts, its own process) and PyTorch with transformers and peft on the same GPU in the same
 * run (bench/peer_torch_gpu.py, on the batch our side wrote), with the ratio; and the Markdown tables.
 *
 * The device: the NVIDIA GPU's name (nvidia-smi) where there is one, else the Vulkan adapter Deno's own
 * WebGPU sees (on CI, Mesa's lavapipe). MFU needs the GPU's dense peak for the compute dtype:
 * `bench.gpu_peak_tflops`, or the table below by name.
 *
 * @module
 */

// deno-lint-ignore-file no-explicit-any -- results are JSON from the benchmark processes

import { join } from "node:path";

/** The settings this section reads (bench.ts's `bench` config section). */
export interface GpuSettings {
  batches: number[];
  prompt_tokens: number;
  decode_tokens: number;
  repeats: number;
  gpu_ep: "webgpu" | "cuda";
  gpu_compute: "float32" | "float16";
  train_tokens: number;
  gpu_peak_tflops: number | null;
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

/** Ours, then PyTorch's, on one model. */
export async function gpuSection(name: string, dir: string, b: GpuSettings, h: Helpers) {
  const device = await gpuDevice(b);
  const batchFile = join(h.OUT, `gpu-batch-${name.replace(/[^\w.-]/g, "_")}.json`);
  console.error(`gpu (${b.gpu_ep}, ${b.gpu_compute}, ${device.name}): ${name} …`);
  const ours = await h.denoScript("gpu_bench.ts", [
    `--model=${dir}`,
    `--ep=${b.gpu_ep}`,
    `--compute=${b.gpu_compute}`,
    `--batches=${b.batches.join(",")}`,
    `--prompt=${b.prompt_tokens}`,
    `--decode=${b.decode_tokens}`,
    `--train-tokens=${b.train_tokens}`,
    `--repeats=${b.repeats}`,
    `--write-batch=${batchFile}`,
    ...(device.peakTflops ? [`--peak-tflops=${device.peakTflops}`] : []),
  ]);
  console.error(`PyTorch (transformers + peft): ${name} …`);
  const peer = await h.runJson("python3", [
    join(h.ROOT, "bench", "peer_torch_gpu.py"),
    `--model=${dir}`,
    `--batch=${batchFile}`,
    `--dtype=${b.gpu_compute}`,
    `--batches=${b.batches.join(",")}`,
    `--prompt=${b.prompt_tokens}`,
    `--decode=${b.decode_tokens}`,
    `--steps=${b.repeats}`,
  ]).catch((e) => ({ error: String(e) }));
  return { device, settings: { ep: b.gpu_ep, compute: b.gpu_compute }, ours, peer };
}

const f = (x: unknown, digits = 1) => (typeof x === "number" && Number.isFinite(x) ? x.toFixed(digits) : "–");
const pct = (x: unknown) => (typeof x === "number" && Number.isFinite(x) ? `${(100 * x).toFixed(1)}%` : "–");
const ratio = (a: unknown, b: unknown) =>
  typeof a === "number" && typeof b === "number" && b > 0 ? `${(a / b).toFixed(2)}×` : "–";

/** Train and decode tables of one model, ours beside PyTorch's. */
export function gpuTables(
  name: string,
  r: { device: any; settings: any; ours: any; peer: any } | undefined,
): string[] {
  if (!r) return [];
  const head = `### GPU, ${name}: ${r.settings.ep}, ${r.settings.compute}, on ${r.device.name}`;
  if (r.ours.error) return [head, "", `ours failed: ${r.ours.error}`, ""];
  const peer = r.peer.error ? null : r.peer;
  const peak = r.device.peakTflops;
  const mfu = (tflops: unknown) => (peak && typeof tflops === "number" ? tflops / peak : null);
  const t = r.ours.train;
  return [
    head,
    "",
    `${r.ours.params.toLocaleString("en")} parameters; MFU against ${
      peak ? `${peak} TFLOP/s` : "an unknown peak"
    }` +
    `; PyTorch: ${
      peer
        ? `torch ${peer.torch_version}, transformers ${peer.transformers_version}, peft ${peer.peft_version}`
        : `unavailable (${r.peer.error})`
    }.`,
    "",
    "| LoRA r16 train step | tokens | s/step | tok/s | TFLOP/s (4N) | MFU | PyTorch tok/s | PyTorch MFU | ratio |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    `| ${name} | ${t.tokens_per_step} | ${f(t.seconds_per_step, 3)} | ${f(t.tok_per_s)} | ${
      f(t.tflops_4n, 3)
    } | ` +
    `${pct(mfu(t.tflops_4n))} | ${f(peer?.train?.tok_per_s)} | ${pct(mfu(peer?.train?.tflops_4n))} | ` +
    `${ratio(t.tok_per_s, peer?.train?.tok_per_s)} |`,
    "",
    "| decode batch | tok/s | TFLOP/s (2N) | PyTorch `generate` tok/s | ratio |",
    "| ---: | ---: | ---: | ---: | ---: |",
    ...r.ours.decode.map((d: any) => {
      const p = peer?.decode?.find((x: any) => x.batch === d.batch);
      return `| ${d.batch} | ${f(d.decode_tok_per_s)} | ${f(d.decode_tflops_2n, 3)} | ${
        f(p?.decode_tok_per_s)
      } | ` +
        `${ratio(d.decode_tok_per_s, p?.decode_tok_per_s)} |`;
    }),
    "",
  ];
}
