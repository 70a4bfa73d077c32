/**
 * `deno run -A bench/serve_bench.ts [--model DIR] [--clients 64] [--seconds 30] [--max-tokens 16]
 * [--prompt-tokens 32] [--slots 32]`: `deno task serve`'s engine under load on loopback. Each client
 * sends completions (token-id prompt, its own seed) back to back for the duration; the run reports
 * requests, errors, throughput and latency percentiles. Without `--model` it uses the tiny random
 * model (2 layers, hidden 64) made in a temporary directory.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { loadPolicy } from "../lib/engine/worker_policy.ts";
import { TINY_PRESET, writeRandomQwen3 } from "../lib/model/random_model.ts";
import { startServer } from "../lib/serve/serve.ts";

const { values: args } = parseArgs({
  args: Deno.args,
  options: Object.fromEntries(
    ["model", "clients", "seconds", "max-tokens", "prompt-tokens", "slots"].map((
      k,
    ) => [k, { type: "string" }]),
  ) as Record<string, { type: "string" }>,
});
const clients = Number(args.clients ?? 64);
const seconds = Number(args.seconds ?? 30);
const maxTokens = Number(args["max-tokens"] ?? 16);
const promptTokens = Number(args["prompt-tokens"] ?? 32);
const slots = Number(args.slots ?? 32);

const modelDir = args.model ??
  (await writeRandomQwen3(await Deno.makeTempDir({ prefix: "serve-bench-" }) + "/model", TINY_PRESET)).dir;
const policy = await loadPolicy(modelDir, { maxSequences: slots });
const server = await startServer(policy, { modelDir, port: 0, maxModelLen: promptTokens + maxTokens + 1 });

const latencies: number[] = [];
let errors = 0;
let tokens = 0;
const until = performance.now() + seconds * 1000;
const client = async (c: number) => {
  const prompt = Array.from({ length: promptTokens }, (_, i) => (c * 131 + i * 7) % 1000 + 1);
  for (let i = 0; performance.now() < until; i++) {
    const start = performance.now();
    const response = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt, max_tokens: maxTokens, seed: c * 100_000 + i, ignore_eos: true }),
    });
    const body = await response.json();
    if (response.status !== 200) errors += 1;
    else tokens += body.usage.completion_tokens;
    latencies.push(performance.now() - start);
  }
};
const started = performance.now();
await Promise.all(Array.from({ length: clients }, (_, c) => client(c)));
const elapsed = (performance.now() - started) / 1000;
await server.close();
await policy.close();

latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(p / 100 * latencies.length))];
console.log(JSON.stringify({
  clients,
  seconds: Number(elapsed.toFixed(1)),
  slots,
  prompt_tokens: promptTokens,
  max_tokens: maxTokens,
  requests: latencies.length,
  errors,
  requests_per_s: Number((latencies.length / elapsed).toFixed(1)),
  tokens_per_s: Number((tokens / elapsed).toFixed(1)),
  latency_ms: Object.fromEntries(
    Object.entries({ p50: pct(50), p90: pct(90), p99: pct(99), max: latencies[latencies.length - 1] })
      .map(([k, v]) => [k, Number(v.toFixed(1))]),
  ),
}));
