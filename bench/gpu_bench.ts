/**
 * GPU benchmark of one model directory on a GPU provider, run as its own process by bench.ts
 * (`deno task bench --only gpu`): a LoRA GRPO train step (r 16 on all seven projections, forward and
 * backward over the micro-batches, no optimizer update) at each `--train-tokens` size in tokens per second
 * and model FLOPs utilization, and decode tokens per second at each batch size (sampling at temperature 1,
 * the KV cache on the device). Writes each train batch as JSON (`<--batch-prefix>-<tokens>.json`) for the
 * PyTorch peer (bench/peer_torch_gpu.py) so that both run the same tokens. Prints one JSON object.
 *
 *   deno run -A bench/gpu_bench.ts --model DIR [--ep webgpu] [--compute float16] [--batches 1,8,32,64]
 *     [--prompt 128] [--decode 64] [--train-tokens 512,8192] [--repeats 3] [--peak-tflops X]
 *     [--batch-prefix FILE_PREFIX] [--webgpu-options storageBufferCacheMode=simple,validationMode=disabled]
 *     [--long-cache 8192]
 *
 * `--webgpu-options` sets onnxruntime's WebGPU provider options (lib/ort/webgpu_options.ts) over the
 * project's defaults (`WEBGPU_DEFAULTS`, what `model.webgpu` defaults to), for every session of the run.
 * On WebGPU the decode rows are measured three times: as the policy runs them by default (plain steps on
 * the If-free decode graph, lib/engine/decode_session.ts), with every step on the main graph
 * (`model.webgpu.decode_graph` false; `decode_main_graph`) and under graph capture
 * (`model.webgpu.graph_capture`; `decode_captured`), so that one run says which is faster on the GPU at
 * hand (capture stays off by default until it is measured so). Each timed generation decodes one token on
 * a new batch first (the capture, where capturing), then `--decode` tokens timed.
 *
 * Every decode row runs in a cache just large enough for its tokens. A rollout opens its sequences with
 * room for every turn, so `--long-cache N` (0 skips it) decodes once more at batch 8 (or the largest batch
 * below it) in an N-position cache, as the policy runs by default: a step whose attention works over the
 * cache's capacity instead of its sequences' length shows as a lower rate than the tight row's
 * (`decode_long_cache`; docs/RELIABILITY.md 208).
 *
 * FLOPs are counted as the CPU benchmarks count them: 4 × parameters per trained token (forward and the
 * backward to the activations; the frozen weights get no gradient), 2 × parameters per decoded token.
 * MFU divides the achieved rate by `--peak-tflops` (the GPU's dense peak for the compute dtype), when
 * given.
 *
 * The diagnosis (`profile`): after the timed runs, a separate short measurement with onnxruntime's
 * profiling on (lib/engine/profiled.ts; profiling slows runs, so no timed run is profiled) reads one
 * decode step at the largest batch (the last step of a second generation, after a warm-up one) and one
 * train micro-batch run at the largest train size (the last run of a second step): onnxruntime kernels
 * run, the run's host wall time, the kernels' host time, the GPU's time where the provider writes GPU
 * timestamps (lib/ort/profile.ts says where; null elsewhere), and the op types by host time.
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { LocalPolicy } from "../lib/engine/local_policy.ts";
import { profiled } from "../lib/engine/profiled.ts";
import type { ComputeDtype } from "../lib/model/graph/forms.ts";
import { initLoraWeights, LORA_TARGET_NAMES, type LoraSpec } from "../lib/model/lora.ts";
import { type ModelDir, openModelDir } from "../lib/model/model_dir.ts";
import { busiestRuns, type RunSummary, summarizeRun, type TraceEvent } from "../lib/ort/profile.ts";
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
  trainTokens: number[];
  repeats: number;
  peakTflops: number | null;
  /** Write each train batch to `<batchPrefix>-<tokens>.json` for the peer. */
  batchPrefix?: string;
  /** Positions of the long-cache decode row's cache; 0 skips it. */
  longCache: number;
}

const TRAIN_ROWS = 2;
/** Tokens each profiled generation decodes: the last step is read, after the first few. */
const PROFILE_DECODE_TOKENS = 4;
/** Op types listed per profiled run. */
const TOP_OPS = 6;
const MICRO_BATCH_TOKENS = 4096;
/** The long-cache decode row's batch, or the largest measured batch below it. */
const LONG_CACHE_BATCH = 8;

/** The train batch of a `tokens` row: TRAIN_ROWS sequences of tokens / TRAIN_ROWS. */
function trainEpisodes(tokens: number, vocab: number) {
  const length = Math.max(8, Math.floor(tokens / TRAIN_ROWS));
  return benchEpisodes(TRAIN_ROWS, length, vocab);
}

function openTrainer(model: ModelDir, o: GpuBenchOptions): Promise<Trainer> {
  const lora: LoraSpec = { r: 16, alpha: 32, rslora: false, targets: [...LORA_TARGET_NAMES] };
  return Trainer.create(model, {
    lora,
    objective: "clipped",
    withReference: false,
    ep: o.ep,
    compute: o.compute,
  }, { providerOptions: o.providerOptions });
}

/**
 * One train step (forward and backward over every micro-batch) on `episodes`, and the log-probs pass over
 * the same micro-batches that the sampler–trainer correction runs each step (`Trainer.logprobs`: the
 * forward alone where `forwardAlone`, else the whole graph), as functions.
 */
function trainStep(trainer: Trainer, model: ModelDir, episodes: ReturnType<typeof trainEpisodes>) {
  const params = initLoraWeights(model.config, trainer.spec.lora, 0);
  const weights = aggregationWeights(episodes, "token_mean", episodes[0].tokens.length);
  const batches = planMicroBatches(episodes, weights, MICRO_BATCH_TOKENS, trainer.maxChunk);
  const scalars = { temperature: 1, epsLow: 0.2, epsHigh: 0.2, beta: 0 };
  return {
    step: () => accumulate(trainer, batches, params, scalars),
    logprobsPass: async () => {
      for (const mb of batches) await trainer.logprobs(mb, params, scalars);
    },
  };
}

/** Train tokens/s and MFU of a LoRA r16 step on `dir`, one row per `o.trainTokens` size. */
async function trainRows(dir: string, o: GpuBenchOptions) {
  const model = await openModelDir(dir);
  let trainer: Trainer | undefined;
  const buildMs = await timeMs(async () => trainer = await openTrainer(model, o));
  try {
    const rows = [];
    for (const tokens of o.trainTokens) {
      const episodes = trainEpisodes(tokens, model.config.vocab_size);
      if (o.batchPrefix) await writeBatchJson(`${o.batchPrefix}-${tokens}.json`, episodes);
      const { step, logprobsPass } = trainStep(trainer!, model, episodes);
      await step(); // warm-up: shaders compile on the first run
      const seconds = await medianOf(o.repeats, async () => (await timeMs(step)) / 1000);
      await logprobsPass(); // warm-up: the forward-alone session opens at its first call
      const passSeconds = await medianOf(o.repeats, async () => (await timeMs(logprobsPass)) / 1000);
      const done = episodes.reduce((n, e) => n + e.tokens.length, 0);
      const tflops = (4 * totalParams(model.config) * done) / seconds / 1e12;
      rows.push({
        tokens_per_step: done,
        build_and_load_ms: buildMs,
        seconds_per_step: seconds,
        tok_per_s: done / seconds,
        tflops_4n: tflops,
        mfu: o.peakTflops ? tflops / o.peakTflops : null,
        logprobs_pass_seconds: passSeconds,
        forward_alone: trainer!.forwardAlone,
      });
    }
    return rows;
  } finally {
    await trainer!.close();
  }
}

/** `batch` prompts of `o.promptTokens` random tokens. */
function randomPrompts(batch: number, o: GpuBenchOptions, vocab: number, rand: () => number): number[][] {
  const draw = () => Math.floor(rand() * Math.min(vocab, 150000));
  return Array.from({ length: batch }, () => Array.from({ length: o.promptTokens }, draw));
}

/**
 * Prefills `prompts` on a new batch and decodes one token each, then `newTokens` more: decode tokens/s of
 * the second call. The first decode step on a batch's KV cache is where graph capture records (a rollout's
 * scheduler keeps one cache for the policy's life, so it records once per decode width; a later batch of the
 * same size gets this one's cache again, already captured: lib/engine/cache_pool.ts); the second call
 * replays, as every later step of a rollout does. Uncaptured decode is timed the same way.
 */
async function generateOnce(
  policy: LocalPolicy,
  prompts: number[][],
  o: GpuBenchOptions,
  newTokens: number,
  capacity = o.promptTokens + newTokens + 2,
) {
  const session = await policy.startBatch(prompts, { capacity });
  try {
    await session.generate({ maxNewTokens: 1, temperature: 1 });
    const before = await session.stats();
    await session.generate({ maxNewTokens: newTokens, temperature: 1 });
    const after = await session.stats();
    return (after.decodeTokens - before.decodeTokens) / ((after.decodeMs - before.decodeMs) / 1000);
  } finally {
    await session.close();
  }
}

/** How the policy runs its plain decode steps (WebGPU's `model.webgpu` keys; absent: the defaults). */
interface DecodeMode {
  decodeGraph?: boolean;
  graphCapture?: boolean;
}

function openPolicy(
  dir: string,
  o: GpuBenchOptions,
  maxSequences: number,
  mode: DecodeMode = {},
): Promise<LocalPolicy> {
  return LocalPolicy.load(dir, {
    ep: o.ep,
    providerOptions: o.providerOptions,
    compute: o.compute,
    maxSequences,
    ...mode,
  });
}

/**
 * Decode tokens/s at each batch size (prefill excluded), sampling at temperature 1, with the decode steps
 * run as `mode` says (under graph capture each is a replay of a captured graph), in a cache just large
 * enough for the tokens or of `at.capacity` positions, at `at.batches` (default `o.batches`).
 */
async function decode(
  dir: string,
  o: GpuBenchOptions,
  mode: DecodeMode = {},
  at: { batches?: number[]; capacity?: number } = {},
) {
  const batches = at.batches ?? o.batches;
  const policy = await openPolicy(dir, o, Math.max(...batches), mode);
  const params = totalParams(policy.config);
  const rand = mulberry32(99);
  try {
    const rows = [];
    for (const batch of batches) {
      const prompts = randomPrompts(batch, o, policy.config.vocab_size, rand);
      const once = () => generateOnce(policy, prompts, o, o.decodeTokens, at.capacity);
      await once(); // warm-up
      const tokPerS = await medianOf(o.repeats, once);
      rows.push({ batch, decode_tok_per_s: tokPerS, decode_tflops_2n: (2 * params * tokPerS) / 1e12 });
    }
    return rows;
  } finally {
    await policy.close();
  }
}

/**
 * Decode tokens/s at `LONG_CACHE_BATCH` (or the largest measured batch below it) in an `o.longCache`-position
 * cache, beside the same batch's rate in the tight cache (`tight`: the default rows), as the policy decodes
 * by default.
 */
async function decodeLongCache(
  dir: string,
  o: GpuBenchOptions,
  tight: { batch: number; decode_tok_per_s: number }[],
) {
  const below = o.batches.filter((b) => b <= LONG_CACHE_BATCH);
  const batch = below.length > 0 ? Math.max(...below) : Math.min(...o.batches);
  const capacity = o.longCache;
  if (capacity < o.promptTokens + o.decodeTokens + 2) {
    throw new Error(`--long-cache ${capacity} does not hold the prompt and the decoded tokens`);
  }
  const [row] = await decode(dir, o, {}, { batches: [batch], capacity });
  return {
    batch,
    capacity,
    decode_tok_per_s: row.decode_tok_per_s,
    tight_decode_tok_per_s: tight.find((t) => t.batch === batch)?.decode_tok_per_s ?? null,
  };
}

/** The last run of the session that ran most (the graph measured), summarized for the JSON. */
function lastRun(traces: readonly TraceEvent[][]) {
  const runs = busiestRuns(traces);
  if (runs.length === 0) {
    throw new Error(`gpu_bench profile: no model_run in the ${traces.length} profile(s) written`);
  }
  return summaryJson(summarizeRun(runs.at(-1)!, TOP_OPS));
}

function summaryJson(s: RunSummary) {
  return {
    kernels: s.kernels,
    gpu_dispatches: s.gpuDispatches,
    run_ms: s.runMs,
    host_ms: s.hostMs,
    gpu_ms: s.gpuMs,
    top_ops: s.ops.map((op) => ({ op: op.op, kernels: op.kernels, host_ms: op.hostMs, gpu_ms: op.gpuMs })),
  };
}

/** One decode step at `batch`, profiled: the last step of a generation after a warm-up one. */
async function profileDecode(dir: string, o: GpuBenchOptions, batch: number) {
  const traces = await profiled(async () => {
    const policy = await openPolicy(dir, o, batch);
    try {
      const prompts = randomPrompts(batch, o, policy.config.vocab_size, mulberry32(7));
      await generateOnce(policy, prompts, o, PROFILE_DECODE_TOKENS); // warm-up
      await generateOnce(policy, prompts, o, PROFILE_DECODE_TOKENS);
    } finally {
      await policy.close();
    }
  });
  return lastRun(traces);
}

/** One train micro-batch run at `tokens`, profiled: the last run of a step after a warm-up step. */
async function profileTrain(dir: string, o: GpuBenchOptions, tokens: number) {
  const model = await openModelDir(dir);
  const traces = await profiled(async () => {
    const trainer = await openTrainer(model, o);
    try {
      const { step } = trainStep(trainer, model, trainEpisodes(tokens, model.config.vocab_size));
      await step(); // warm-up
      await step();
    } finally {
      await trainer.close();
    }
  });
  return lastRun(traces);
}

/** `measure()`, or its failure as `{ error }` so that the timed rows are still reported. */
async function orError<T>(measure: () => Promise<T>): Promise<T | { error: string }> {
  try {
    return await measure();
  } catch (e) {
    return { error: e instanceof Error ? e.message : String(e) };
  }
}

export async function benchGpu(dir: string, o: GpuBenchOptions) {
  const model = await openModelDir(dir);
  const train = await trainRows(dir, o);
  const decodeRows = await decode(dir, o);
  // The decode graph and graph capture exist on WebGPU only; a failure there still reports the rows above.
  const webgpu = o.ep === "webgpu";
  const decodeMainGraph = webgpu ? await orError(() => decode(dir, o, { decodeGraph: false })) : null;
  const decodeCaptured = webgpu ? await orError(() => decode(dir, o, { graphCapture: true })) : null;
  const decodeLong = o.longCache > 0 ? await orError(() => decodeLongCache(dir, o, decodeRows)) : null;
  const batch = Math.max(...o.batches), tokens = Math.max(...o.trainTokens);
  const profile = {
    decode_step: { batch, ...await orError(() => profileDecode(dir, o, batch)) },
    train_run: { tokens, ...await orError(() => profileTrain(dir, o, tokens)) },
  };
  return {
    impl: "deno-rl",
    model: dir,
    ep: o.ep,
    provider_options: o.providerOptions,
    compute: o.compute,
    params: totalParams(model.config),
    peak_tflops: o.peakTflops,
    train,
    decode: decodeRows,
    decode_main_graph: decodeMainGraph,
    decode_captured: decodeCaptured,
    decode_long_cache: decodeLong,
    profile,
  };
}

/** A comma-separated list of whole numbers. */
const numbers = (text: string) => text.split(",").map(Number);

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
      "batch-prefix",
      "webgpu-options",
      "long-cache",
    ],
  });
  const v = values as Record<string, string | undefined>;
  if (!v.model) throw new Error("gpu_bench: --model DIR is required");
  const ep = (v.ep ?? "webgpu") as ExecutionProvider;
  const result = await benchGpu(v.model, {
    ep,
    providerOptions: ep === "webgpu" ? { ...WEBGPU_DEFAULTS, ...keyValues(v["webgpu-options"] ?? "") } : {},
    compute: (v.compute ?? "float16") as ComputeDtype,
    batches: numbers(v.batches ?? "1,8,32,64"),
    promptTokens: Number(v.prompt ?? 128),
    decodeTokens: Number(v.decode ?? 64),
    trainTokens: numbers(v["train-tokens"] ?? "512,8192"),
    repeats: Number(v.repeats ?? 3),
    peakTflops: v["peak-tflops"] ? Number(v["peak-tflops"]) : null,
    batchPrefix: v["batch-prefix"],
    longCache: Number(v["long-cache"] ?? 8192),
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
