/**
 * GPU benchmark of one model directory on a GPU provider, run as its own process by bench.ts
 * (`deno task bench --only gpu`): a LoRA GRPO train step (r 16 on all seven projections, forward and
 * backward over the micro-batches, no optimizer update) in tokens per second and model FLOPs utilization,
 * and decode tokens per second at each batch size (sampling at temperature 1, the KV cache on the
 * device). Writes the train batch as JSON for the PyTorch peer (bench/peer_torch_gpu.py) so that both run
 * the same tokens. Prints one JSON object.
 *
 *   deno run -A bench/gpu_bench.ts --model DIR [--ep webgpu] [--compute float16] [--batches 1,8,32]
 *     [--prompt 128] [--decode 64] [--train-tokens 512] [--repeats 3] [--peak-tflops X] [--write-batch FILE]
 *     [--webgpu-options storageBufferCacheMode=simple,validationMode=disabled]
 *
 * `--webgpu-options` sets onnxruntime's WebGPU provider options (lib/ort/webgpu_options.ts) over the
 * project's defaults (`WEBGPU_DEFAULTS`, what `model.webgpu` defaults to), for every session of the run.
 *
 * FLOPs are counted as the CPU benchmarks count them: 4 × parameters per trained token (forward and the
 * backward to the activations; the frozen weights get no gradient), 2 × parameters per decoded token.
 * MFU divides the achieved rate by `--peak-tflops` (the GPU's dense peak for the compute dtype), when
 * given.
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { LocalPolicy } from "../lib/engine/local_policy.ts";
import type { ComputeDtype } from "../lib/model/graph/forms.ts";
import { initLoraWeights, LORA_TARGET_NAMES, type LoraSpec } from "../lib/model/lora.ts";
import { openModelDir } from "../lib/model/model_dir.ts";
import type { ExecutionProvider, ProviderOptions } from "../lib/ort/providers.ts";
import { WEBGPU_DEFAULTS } from "../lib/config/sections/model.ts";
import { aggregationWeights, planMicroBatches } from "../lib/train/batch.ts";
import { accumulate } from "../lib/train/step.ts";
import { Trainer } from "../lib/train/trainer.ts";
import { medianOf, timeMs } from "./measure.ts";
import { benchEpisodes, totalParams, writeBatchJson } from "./train_bench.ts";
import { mulberry32 } from "../lib/data/random.ts";

export interface GpuBenchOptions {
  ep: ExecutionProvider;
  /** `ep`'s onnxruntime options (webgpu's: `WEBGPU_DEFAULTS` unless `--webgpu-options` changes them). */
  providerOptions: ProviderOptions;
  compute: ComputeDtype;
  batches: number[];
  promptTokens: number;
  decodeTokens: number;
  trainTokens: number;
  repeats: number;
  peakTflops: number | null;
  writeBatch?: string;
}

const TRAIN_ROWS = 2;

/** Train tokens/s and MFU of a LoRA r16 step on `dir`. */
async function trainStep(dir: string, o: GpuBenchOptions) {
  const model = await openModelDir(dir);
  const spec: LoraSpec = { r: 16, alpha: 32, rslora: false, targets: [...LORA_TARGET_NAMES] };
  const length = Math.max(8, Math.floor(o.trainTokens / TRAIN_ROWS));
  const episodes = benchEpisodes(TRAIN_ROWS, length, model.config.vocab_size);
  if (o.writeBatch) await writeBatchJson(o.writeBatch, episodes);
  let trainer: Trainer | undefined;
  const buildMs = await timeMs(async () => {
    trainer = await Trainer.create(model, {
      lora: spec,
      objective: "clipped",
      withReference: false,
      ep: o.ep,
      compute: o.compute,
    }, { providerOptions: o.providerOptions });
  });
  try {
    const params = initLoraWeights(model.config, spec, 0);
    const weights = aggregationWeights(episodes, "token_mean", length);
    const batches = planMicroBatches(episodes, weights, 4096, trainer!.maxChunk);
    const scalars = { temperature: 1, epsLow: 0.2, epsHigh: 0.2, beta: 0 };
    const step = () => accumulate(trainer!, batches, params, scalars);
    await step(); // warm-up: shaders compile on the first run
    const seconds = await medianOf(o.repeats, async () => (await timeMs(step)) / 1000);
    const tokens = TRAIN_ROWS * length;
    const tflops = (4 * totalParams(model.config) * tokens) / seconds / 1e12;
    return {
      tokens_per_step: tokens,
      build_and_load_ms: buildMs,
      seconds_per_step: seconds,
      tok_per_s: tokens / seconds,
      tflops_4n: tflops,
      mfu: o.peakTflops ? tflops / o.peakTflops : null,
    };
  } finally {
    await trainer!.close();
  }
}

/** Decode tokens/s at each batch size (prefill excluded), sampling at temperature 1. */
async function decode(dir: string, o: GpuBenchOptions) {
  const policy = await LocalPolicy.load(dir, {
    ep: o.ep,
    providerOptions: o.providerOptions,
    compute: o.compute,
    maxSequences: Math.max(...o.batches),
  });
  const params = totalParams(policy.config);
  const rand = mulberry32(99);
  try {
    const rows = [];
    for (const batch of o.batches) {
      const prompts = Array.from(
        { length: batch },
        () =>
          Array.from(
            { length: o.promptTokens },
            () => Math.floor(rand() * Math.min(policy.config.vocab_size, 150000)),
          ),
      );
      const once = async () => {
        const session = await policy.startBatch(prompts, { capacity: o.promptTokens + o.decodeTokens + 1 });
        try {
          await session.generate({ maxNewTokens: o.decodeTokens, temperature: 1 });
          const s = await session.stats();
          return s.decodeTokens / (s.decodeMs / 1000);
        } finally {
          await session.close();
        }
      };
      await once(); // warm-up
      const tokPerS = await medianOf(o.repeats, once);
      rows.push({ batch, decode_tok_per_s: tokPerS, decode_tflops_2n: (2 * params * tokPerS) / 1e12 });
    }
    return rows;
  } finally {
    await policy.close();
  }
}

export async function benchGpu(dir: string, o: GpuBenchOptions) {
  const model = await openModelDir(dir);
  return {
    impl: "deno-rl",
    model: dir,
    ep: o.ep,
    provider_options: o.providerOptions,
    compute: o.compute,
    params: totalParams(model.config),
    peak_tflops: o.peakTflops,
    train: await trainStep(dir, o),
    decode: await decode(dir, o),
  };
}

if (import.meta.main) {
  const { values } = parseArgs(Deno.args, {
    string: [
      "model",
      "ep",
      "compute",
      "batches",
      "prompt",
      "decode",
      "train-tokens",
      "repeats",
      "peak-tflops",
      "write-batch",
      "webgpu-options",
    ],
  });
  const v = values as Record<string, string | undefined>;
  if (!v.model) throw new Error("gpu_bench: --model DIR is required");
  const ep = (v.ep ?? "webgpu") as ExecutionProvider;
  const result = await benchGpu(v.model, {
    ep,
    providerOptions: ep === "webgpu" ? { ...WEBGPU_DEFAULTS, ...keyValues(v["webgpu-options"] ?? "") } : {},
    compute: (v.compute ?? "float16") as ComputeDtype,
    batches: (v.batches ?? "1,8,32").split(",").map(Number),
    promptTokens: Number(v.prompt ?? 128),
    decodeTokens: Number(v.decode ?? 64),
    trainTokens: Number(v["train-tokens"] ?? 512),
    repeats: Number(v.repeats ?? 3),
    peakTflops: v["peak-tflops"] ? Number(v["peak-tflops"]) : null,
    writeBatch: v["write-batch"],
  });
  console.log(JSON.stringify(result));
}

/** `"a=1,b=2"` → `{ a: "1", b: "2" }`. */
function keyValues(text: string): Record<string, string> {
  return Object.fromEntries(
    text.split(",").filter(Boolean).map((kv) => {
      const at = kv.indexOf("=");
      if (at < 1) {
        throw new Error(`gpu_bench: --webgpu-options ${kv}: write key=value, e.g. validationMode=disabled`);
      }
      return [kv.slice(0, at), kv.slice(at + 1)];
    }),
  );
}
