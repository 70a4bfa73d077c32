/**
 * Markdown for the benchmark results (bench.ts): the machine, and per model the engine and trainer
 * tables with the peers' figures and our ratio to them.
 *
 * @module
 */

// deno-lint-ignore-file no-explicit-any -- results are JSON from the benchmark processes

import denoJson from "../deno.json" with { type: "json" };
import type { RunResult as AlgorithmRun } from "./algorithms_bench.ts";

/** One line each: CPU, cores, memory, OS, Deno and package versions. */
export async function machineLines(): Promise<string[]> {
  // Deno reads /proc/cpuinfo only with --allow-all; `cat` needs just --allow-run.
  const cpuinfo = await new Deno.Command("cat", { args: ["/proc/cpuinfo"], stdout: "piped", stderr: "null" })
    .output()
    .then((o) => new TextDecoder().decode(o.stdout)).catch(() => "");
  const cpu = /model name\s*:\s*(.+)/.exec(cpuinfo)?.[1] ?? "unknown CPU";
  const flags = /flags\s*:\s*(.+)/.exec(cpuinfo)?.[1].split(" ") ?? [];
  const simd = ["avx2", "avx512f", "avx512_bf16", "amx_bf16"].filter((f) => flags.includes(f)).join(", ");
  const memGiB = Deno.systemMemoryInfo().total / (1 << 30);
  const imports = denoJson.imports as Record<string, string>;
  return [
    `CPU: ${cpu} (${navigator.hardwareConcurrency} logical cores; ${simd || "no AVX2"})`,
    `memory: ${memGiB.toFixed(1)} GiB; OS: ${Deno.build.os} ${Deno.osRelease()}`,
    `Deno ${Deno.version.deno}; ${imports["onnxruntime-node"]}; ${imports["@huggingface/transformers"]}`,
  ];
}

/** `x` with `digits` decimals, or "–" where it is no finite number (a failed measurement). */
export const fixedOrDash = (x: unknown, digits = 1) =>
  typeof x === "number" && Number.isFinite(x) ? x.toFixed(digits) : "–";
const f = fixedOrDash;
const ratio = (
  a: unknown,
  b: unknown,
) => (typeof a === "number" && typeof b === "number" && b > 0 ? `${(a / b).toFixed(2)}×` : "–");

/** Engine tables of one model: throughput per batch with the peer ratio, decode vs context, log-probs. */
export function engineTables(name: string, r: { ours: any; peer: any[] }): string[] {
  const o = r.ours;
  if (o.error) return [`### Engine, ${name}: failed — ${o.error}`, ""];
  const peerAt = (batch: number) => r.peer.find((p) => p.batch === batch);
  return [
    `### Engine, ${name} (${o.matmul_params.toLocaleString("en")} matmul params, ${
      o.threads || "all"
    } threads)`,
    "",
    `onnxruntime MatMul peak here: ${f(o.matmul_peak_gflops)} GFLOP/s; load ${f(o.load_ms / 1000, 2)} s; ` +
    `peak RSS after load ${f(o.peak_rss_after_load_mib, 0)} MiB.`,
    "",
    "| batch | prefill tok/s | prefill GFLOP/s | decode ms/step | decode tok/s | decode GFLOP/s | transformers.js decode tok/s | ratio |",
    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...o.batches.map((b: any) => {
      const p = peerAt(b.batch);
      const peerTok = p?.decodeTokensPerSecond;
      return `| ${b.batch} | ${f(b.prefill_tok_per_s)} | ${f(b.prefill_gflops)} | ${
        f(b.decode_ms_per_step, 2)
      } | ` +
        `${f(b.decode_tok_per_s)} | ${f(b.decode_gflops)} | ${p?.error ? "failed" : f(peerTok)} | ${
          ratio(b.decode_tok_per_s, peerTok)
        } |`;
    }),
    "",
    "Decode step time (batch 1) against context length and KV-cache capacity:",
    "",
    "| context | cache capacity | ms/step |",
    "| ---: | ---: | ---: |",
    ...o.decode_vs_context.map((c: any) => `| ${c.context} | ${c.capacity} | ${f(c.ms_per_step, 2)} |`),
    "",
    `Continuation: ${o.continuation.appended} tokens appended after a ${o.continuation.prefix}-token turn, then ` +
    `the next token: ${f(o.continuation.continued_ms, 1)} ms, against ${
      f(o.continuation.from_scratch_ms, 1)
    } ms ` +
    `from an empty cache (${f(o.continuation.saving, 1)}× less).`,
    "",
    `Log-probs of ${o.logprobs.rows} × ${o.logprobs.length} tokens: ${f(o.logprobs.tok_per_s)} tok/s ` +
    `(${f(o.logprobs.gflops)} GFLOP/s), peak RSS ${f(o.logprobs.peak_rss_mib, 0)} MiB ` +
    `(from ${f(o.logprobs.rss_before_mib, 0)} MiB before; a [tokens, vocab] float32 tensor alone would be ` +
    `${f(o.logprobs.full_logits_would_be_mib, 0)} MiB).`,
    "",
  ];
}

/** The BLAS library the PyTorch peer actually loaded (its config string says "generic" either way). */
function blasOf(x: any): string {
  const loaded: string[] = x.blas_loaded ?? [];
  return loaded.find((l) => /openblas/i.test(l)) ?? loaded.join(" ") ?? x.blas ?? "";
}

/** Train table of one model: ours and the PyTorch peer on the same batch. */
export function trainTables(name: string, r: { ours: any; peer: any }): string[] {
  const o = r.ours, p = r.peer;
  const row = (label: string, x: any) =>
    x.error
      ? `| ${label} | failed: ${String(x.error).slice(0, 120)} | | | | |`
      : `| ${label} | ${f(x.seconds_per_step, 2)} | ${f(x.tok_per_s)} | ${f(x.gflops_4n)} | ${
        f(x.peak_rss_mib, 0)
      } | ${
        x.impl === "torch" ? `torch ${x.torch_version ?? "?"}, ${blasOf(x)}, ${x.threads} threads` : ""
      } |`;
  return [
    `### Train step (LoRA r${o.rank ?? 16} on all projections, GRPO forward + backward, ${
      o.tokens_per_step ?? "?"
    } tokens), ${name}`,
    "",
    "| implementation | s/step | tok/s | GFLOP/s (4 × params × tokens) | peak RSS MiB | notes |",
    "| --- | ---: | ---: | ---: | ---: | --- |",
    row("deno-rl (onnxruntime)", o),
    row("PyTorch", p),
    "",
    `Ratio (ours / PyTorch, tok/s): ${ratio(o.tok_per_s, p.tok_per_s)}.`,
    "",
  ];
}

/** The loop's process with separate and with shared weights, and PyTorch's train peak on the same batch. */
export function weightsTables(name: string, r: { separate: any; shared: any; peer: any }): string[] {
  const row = (label: string, x: any) =>
    x.error
      ? `| ${label} | failed: ${String(x.error).slice(0, 120)} | | | |`
      : `| ${label} | ${f(x.peak_rss_mib, 0)} | ${f(x.rss_sessions_open_mib, 0)} | ${
        f(x.decode_ms_per_step, 0)
      } | ${f(x.train_seconds_per_step ?? x.seconds_per_step, 2)} |`;
  const s = r.separate;
  return [
    `### The loop's memory: policy + trainer in one process, ${s.steps ?? "?"} steps, ${name}`,
    "",
    `Each step decodes ${s.decode_tokens ?? "?"} tokens for ${
      s.decode_batch ?? "?"
    } sequences (greedy), then runs one train step ` +
    `(LoRA r${s.rank ?? 16} on all projections, GRPO forward + backward, ${
      s.tokens_per_step ?? "?"
    } tokens); ` +
    "PyTorch runs only the train step, on the same batch (its peak is the target). Medians over the steps.",
    "",
    "| process | peak RSS MiB | RSS with sessions open MiB | decode ms/step | train s/step |",
    "| --- | ---: | ---: | ---: | ---: |",
    row("deno-rl, separate weights (each session folds a copy)", s),
    row("deno-rl, shared weights (one float32 copy)", r.shared),
    r.peer.error
      ? `| PyTorch train step | failed: ${String(r.peer.error).slice(0, 120)} | | | |`
      : `| PyTorch train step | ${f(r.peer.peak_rss_mib, 0)} | | | ${f(r.peer.seconds_per_step, 2)} |`,
    "",
  ];
}

/** The loop benchmark (bench/loop_bench.ts): seconds per step on the demo config, peak RSS on the 0.6B shape. */
export function loopTables(r: Record<string, any>, peer: any): string[] {
  const variants = Object.keys(r).filter((k) => k !== "error");
  const demo = (v: string) => r[v].demo;
  const big = (v: string) => r[v].big;
  const steps = demo(variants[0])?.steps ?? "?";
  return [
    `### The loop, per step on the demo configuration (${steps} steps) and its peak on the 0.6B shape (3 steps)`,
    "",
    "`stages/loop.ts` in its own process. Seconds per step are the run's own metrics (means over the steps); " +
    "`before` is the older revision checked out by the bench, its train seconds including the model load " +
    "and train-graph build it did every step. The 0.6B loop samples 2 episodes of up to 256 tokens per step " +
    "and trains LoRA r16 on all projections; PyTorch's peak is its train step on 2 × 256 tokens.",
    "",
    "| loop | rollout s | score s | mask s | train s | process wall s (demo) | peak RSS MiB (0.6B) |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...variants.map((v) =>
      `| ${v} | ${f(demo(v).rollout, 2)} | ${f(demo(v).score, 2)} | ${f(demo(v).mask, 2)} | ${
        f(demo(v).train, 2)
      } | ${f(demo(v).wall_seconds, 1)} | ${f(big(v).peak_mib, 0)} |`
    ),
    peer?.error
      ? `| PyTorch train step | | | | | | failed: ${String(peer.error).slice(0, 80)} |`
      : `| PyTorch train step (2 × 256 tokens) | | | | ${f(peer?.seconds_per_step, 2)} | | ${
        f(peer?.peak_rss_mib, 0)
      } |`,
    "",
  ];
}

/** Mean ± sample standard deviation (over seeds), in percent; "–" without finite values. */
function meanSpread(values: number[]): string {
  const v = values.filter(Number.isFinite);
  if (v.length === 0) return "–";
  const mean = v.reduce((a, b) => a + b, 0) / v.length;
  const sd = v.length > 1 ? Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / (v.length - 1)) : 0;
  return `${(100 * mean).toFixed(1)} ± ${(100 * sd).toFixed(1)}`;
}

/**
 * BENCH.md's algorithms table per task: held-out accuracy and tool use after the warm start and at the
 * end, training tool-call success at the last step, mean ± sample std over seeds, and the gain of each
 * algorithm over grpo seed by seed (the same warm start).
 */
export function algorithmsTables(runs: AlgorithmRun[]): string[] {
  const out: string[] = [];
  for (const task of [...new Set(runs.map((r) => r.task))]) {
    const own = runs.filter((r) => r.task === task);
    const seeds = [...new Set(own.map((r) => r.seed))].length;
    out.push(
      `### Algorithms on ${task} (${seeds} seeds; held-out accuracy and tool use in %, mean ± std over seeds)`,
      "",
      "| algorithm | steps | accuracy after warm start | accuracy at the end | gain over grpo (points) | tool use at the end | tool calls ok, last step |",
      "| --- | --- | --- | --- | --- | --- | --- |",
    );
    for (const algorithm of [...new Set(own.map((r) => r.algorithm))]) {
      const rs = own.filter((r) => r.algorithm === algorithm);
      const grpo = (seed: number) =>
        own.find((r) => r.algorithm === "grpo" && r.seed === seed)?.accuracyAfter;
      const gain = rs.map((r) => r.accuracyAfter - (grpo(r.seed) ?? NaN));
      const failed = rs.filter((r) => r.error).length;
      out.push(
        `| ${algorithm}${failed ? ` (${failed} failed)` : ""} | ${Math.max(...rs.map((r) => r.steps))} | ` +
          `${meanSpread(rs.map((r) => r.accuracyBefore))} | ${
            meanSpread(rs.map((r) => r.accuracyAfter))
          } | ` +
          `${algorithm === "grpo" ? "–" : meanSpread(gain)} | ${
            meanSpread(rs.map((r) => r.toolUseAfter))
          } | ` +
          `${meanSpread(rs.map((r) => r.toolSuccessLast))} |`,
      );
    }
    out.push("");
  }
  return out;
}
