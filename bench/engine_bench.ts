/**
 * Engine benchmark of one model directory, run as its own process by bench.ts (so peak memory is
 * this model's alone): prefill and decode throughput per batch size, decode step time against
 * context length and against cache capacity, log-prob throughput and peak memory, achieved GFLOP/s.
 * Prints one JSON object.
 *
 *   deno run -A bench/engine_bench.ts --model DIR [--batches 1,8,32] [--prompt 128] [--decode 64]
 *     [--repeats 3] [--threads 0] [--contexts 128,512,1024] [--logprob-rows 8] [--logprob-len 1024]
 *     [--temperature 0]
 *
 * The policy runs on this thread (`LocalPolicy`): the Worker that `loadPolicy` adds only forwards
 * messages, and timing it here keeps the measurement free of message passing.
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { LocalPolicy } from "../lib/engine/local_policy.ts";
import type { Qwen3Config } from "../lib/model/hf_config.ts";
import { linearShape, QWEN3_LINEARS } from "../lib/model/model_dir.ts";
import { matmulPeakGflops, median, medianOf, peakRssMiB, resetPeakRss, rssMiB, timeMs } from "./measure.ts";

export interface EngineBenchOptions {
  batches: number[];
  promptTokens: number;
  decodeTokens: number;
  repeats: number;
  threads: number;
  contexts: number[];
  logprobRows: number;
  logprobLen: number;
  /** Decode temperature; 0 = greedy, as the transformers.js peer decodes. */
  temperature: number;
}

/** Parameters the forward pass multiplies per token: every Linear plus the head (not the lookup). */
export function matmulParams(cfg: Qwen3Config): number {
  const perLayer = QWEN3_LINEARS.reduce(
    (n, lin) => n + linearShape(cfg, lin)[0] * linearShape(cfg, lin)[1],
    0,
  );
  return perLayer * cfg.num_hidden_layers + cfg.vocab_size * cfg.hidden_size;
}

/** Head FLOPs of one row: logits over the vocabulary. */
export function headFlops(cfg: Qwen3Config): number {
  return 2 * cfg.vocab_size * cfg.hidden_size;
}

/** Decoder FLOPs of one token at position `context` (no head): 2 per weight, plus QKᵀ and PV. */
export function bodyFlops(cfg: Qwen3Config, context: number): number {
  const attention = 4 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim * context;
  return 2 * (matmulParams(cfg) - cfg.vocab_size * cfg.hidden_size) + attention;
}

/** Forward FLOPs of one token with its logits (log-probs, decode). */
export function tokenFlops(cfg: Qwen3Config, context: number): number {
  return bodyFlops(cfg, context) + headFlops(cfg);
}

function prompts(batch: number, length: number, vocab: number, salt: number): number[][] {
  return Array.from(
    { length: batch },
    (_, b) =>
      Array.from({ length }, (_, t) => (salt * 7919 + b * 104729 + t * 1299709) % Math.min(vocab, 150000)),
  );
}

/** Prefill and decode of `batch` prompts; medians over repeats. */
async function prefillDecode(policy: LocalPolicy, batch: number, o: EngineBenchOptions) {
  const cfg = policy.config;
  const runs: { prefillMs: number; decodeMsPerStep: number; decodeTokPerS: number }[] = [];
  for (let r = 0; r <= o.repeats; r++) {
    const p = prompts(batch, o.promptTokens, cfg.vocab_size, r);
    const session = await policy.startBatch(p, { capacity: o.promptTokens + o.decodeTokens + 1 });
    await session.generate({ maxNewTokens: o.decodeTokens, temperature: o.temperature });
    const s = await session.stats();
    await session.close();
    if (r > 0) { // run 0 warms up
      runs.push({
        prefillMs: s.prefillMs,
        decodeMsPerStep: s.decodeMs / s.decodeSteps,
        decodeTokPerS: (s.decodeTokens / s.decodeMs) * 1000,
      });
    }
  }
  const prefillMs = median(runs.map((x) => x.prefillMs));
  const prefillTokens = batch * o.promptTokens;
  const msPerStep = median(runs.map((x) => x.decodeMsPerStep));
  const midContext = o.promptTokens + o.decodeTokens / 2;
  return {
    batch,
    prefill_tokens: prefillTokens,
    prefill_ms: prefillMs,
    prefill_tok_per_s: (prefillTokens / prefillMs) * 1000,
    // Prefill computes logits for each sequence's last token only.
    prefill_gflops: (prefillTokens * bodyFlops(cfg, o.promptTokens / 2) + batch * headFlops(cfg)) /
      prefillMs / 1e6,
    decode_ms_per_step: msPerStep,
    decode_tok_per_s: median(runs.map((x) => x.decodeTokPerS)),
    decode_gflops: (batch * tokenFlops(cfg, midContext)) / msPerStep / 1e6,
  };
}

/** Batch-1 decode step time at several context lengths, and at one context with a 4× larger cache. */
async function decodeVsContext(policy: LocalPolicy, o: EngineBenchOptions) {
  const steps = 16;
  const one = async (context: number, capacity: number) =>
    await medianOf(o.repeats, async () => {
      const p = prompts(1, context, policy.config.vocab_size, context);
      const session = await policy.startBatch(p, { capacity });
      await session.generate({ maxNewTokens: steps, temperature: o.temperature });
      const s = await session.stats();
      await session.close();
      return s.decodeMs / s.decodeSteps;
    });
  const rows = [];
  for (const context of o.contexts) {
    rows.push({
      context,
      capacity: context + steps + 1,
      ms_per_step: await one(context, context + steps + 1),
    });
  }
  const c = o.contexts[0];
  rows.push({ context: c, capacity: 4 * (c + steps + 1), ms_per_step: await one(c, 4 * (c + steps + 1)) });
  return rows;
}

/**
 * What a continuation saves: after a turn on a `prefix`-token prompt, 32 appended tokens (a tool result)
 * and the next sampled token, against scoring the whole sequence again from an empty cache.
 */
async function continuation(policy: LocalPolicy, o: EngineBenchOptions) {
  const prefix = o.contexts[Math.min(1, o.contexts.length - 1)];
  const appended = 32;
  const [prompt] = prompts(1, prefix, policy.config.vocab_size, 7);
  const tool = prompts(1, appended, policy.config.vocab_size, 8)[0];
  const continued = await medianOf(o.repeats, async () => {
    const session = await policy.startBatch([prompt], { capacity: prefix + appended + 4 });
    await session.generate({ maxNewTokens: 1, temperature: 0 });
    await session.append(0, tool);
    const ms = await timeMs(() => session.generate({ maxNewTokens: 1, temperature: 0 }));
    await session.close();
    return ms;
  });
  const full = [...prompt, 0, ...tool];
  const fresh = await medianOf(o.repeats, async () => {
    const session = await policy.startBatch([full], { capacity: full.length + 2 });
    const ms = await timeMs(() => session.generate({ maxNewTokens: 1, temperature: 0 }));
    await session.close();
    return ms;
  });
  return { prefix, appended, continued_ms: continued, from_scratch_ms: fresh, saving: fresh / continued };
}

/** Log-probs of `rows × len` tokens: throughput and the peak memory it adds. */
async function logprobThroughput(policy: LocalPolicy, o: EngineBenchOptions) {
  const seqs = prompts(o.logprobRows, o.logprobLen, policy.config.vocab_size, 99);
  await policy.logprobs(seqs.slice(0, 1)); // warm-up
  const before = rssMiB();
  const canReset = resetPeakRss();
  const ms = await timeMs(() => policy.logprobs(seqs));
  const tokens = o.logprobRows * o.logprobLen;
  const vocabTensorMiB = (tokens * policy.config.vocab_size * 4) / (1 << 20);
  return {
    rows: o.logprobRows,
    length: o.logprobLen,
    ms,
    tok_per_s: (tokens / ms) * 1000,
    gflops: (tokens * tokenFlops(policy.config, o.logprobLen / 2)) / ms / 1e6,
    rss_before_mib: before,
    peak_rss_mib: canReset ? peakRssMiB() : null,
    full_logits_would_be_mib: vocabTensorMiB,
  };
}

/** Runs every measurement on the model at `dir`. */
export async function benchEngine(dir: string, o: EngineBenchOptions) {
  const matmul = await matmulPeakGflops(o.threads);
  resetPeakRss();
  const loadMs = await timeMs(async () =>
    await (await LocalPolicy.load(dir, { threads: o.threads })).close()
  );
  const policy = await LocalPolicy.load(dir, { threads: o.threads });
  const afterLoad = peakRssMiB();
  try {
    const batches = [];
    for (const b of o.batches) batches.push(await prefillDecode(policy, b, o));
    return {
      model: dir,
      config: policy.config,
      matmul_params: matmulParams(policy.config),
      threads: o.threads,
      matmul_peak_gflops: matmul,
      load_ms: loadMs,
      peak_rss_after_load_mib: afterLoad,
      batches,
      decode_vs_context: await decodeVsContext(policy, o),
      continuation: await continuation(policy, o),
      logprobs: await logprobThroughput(policy, o),
    };
  } finally {
    await policy.close();
  }
}

const list = (s: string) => s.split(",").map(Number);

if (import.meta.main) {
  const { values } = parseArgs(Deno.args, {
    string: [
      "model",
      "batches",
      "prompt",
      "decode",
      "repeats",
      "threads",
      "contexts",
      "logprob-rows",
      "logprob-len",
    ],
  });
  const v = values as Record<string, string | undefined>;
  if (!v.model) throw new Error("engine_bench: --model DIR is required");
  const result = await benchEngine(v.model, {
    batches: list(v.batches ?? "1,8,32"),
    promptTokens: Number(v.prompt ?? 128),
    decodeTokens: Number(v.decode ?? 64),
    repeats: Number(v.repeats ?? 3),
    threads: Number(v.threads ?? 0),
    contexts: list(v.contexts ?? "128,512,1024"),
    logprobRows: Number(v["logprob-rows"] ?? 8),
    logprobLen: Number(v["logprob-len"] ?? 1024),
    temperature: Number(v.temperature ?? 0),
  });
  console.log(JSON.stringify(result));
}
