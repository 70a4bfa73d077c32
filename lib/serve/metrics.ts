/**
 * Prometheus metrics of `deno task serve` (`GET /metrics`, text exposition format 0.0.4), named as vLLM
 * names its own where one exists: requests by route and status, prompt and generated tokens, choices
 * finished by reason, sequences running and waiting for a slot, and histograms of request latency and
 * time to the first token.
 *
 * @module
 */

const BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

class Histogram {
  readonly counts = new Array<number>(BUCKETS.length).fill(0);
  sum = 0;
  count = 0;

  observe(seconds: number): void {
    this.sum += seconds;
    this.count += 1;
    BUCKETS.forEach((b, i) => (this.counts[i] += seconds <= b ? 1 : 0));
  }

  lines(name: string): string[] {
    return [
      ...BUCKETS.map((b, i) => `${name}_bucket{le="${b}"} ${this.counts[i]}`),
      `${name}_bucket{le="+Inf"} ${this.count}`,
      `${name}_sum ${this.sum}`,
      `${name}_count ${this.count}`,
    ];
  }
}

export class Metrics {
  /** Sequences generating now, and waiting for a slot. */
  running = 0;
  waiting = 0;
  promptTokens = 0;
  generationTokens = 0;
  readonly #requests = new Map<string, number>();
  readonly #finished = new Map<string, number>();
  readonly #latency = new Histogram();
  readonly #firstToken = new Histogram();

  /** An answered request: its route, status and time taken. */
  request(path: string, status: number, ms: number): void {
    const key = `route="${path}",status="${status}"`;
    this.#requests.set(key, (this.#requests.get(key) ?? 0) + 1);
    this.#latency.observe(ms / 1000);
  }

  /** A finished choice: its finish reason and token counts. */
  choice(finishReason: string, completionTokens: number): void {
    this.#finished.set(finishReason, (this.#finished.get(finishReason) ?? 0) + 1);
    this.generationTokens += completionTokens;
  }

  firstToken(ms: number): void {
    this.#firstToken.observe(ms / 1000);
  }

  /** The exposition text. */
  render(model: string): string {
    const m = `model_name="${model.replaceAll('"', '\\"')}"`;
    const out = [
      "# HELP vllm:num_requests_running Sequences generating now.",
      "# TYPE vllm:num_requests_running gauge",
      `vllm:num_requests_running{${m}} ${this.running}`,
      "# HELP vllm:num_requests_waiting Sequences waiting for a free slot.",
      "# TYPE vllm:num_requests_waiting gauge",
      `vllm:num_requests_waiting{${m}} ${this.waiting}`,
      "# HELP vllm:prompt_tokens_total Prompt tokens of sampled choices.",
      "# TYPE vllm:prompt_tokens_total counter",
      `vllm:prompt_tokens_total{${m}} ${this.promptTokens}`,
      "# HELP vllm:generation_tokens_total Tokens sampled.",
      "# TYPE vllm:generation_tokens_total counter",
      `vllm:generation_tokens_total{${m}} ${this.generationTokens}`,
      "# HELP vllm:request_success_total Choices finished, by finish reason.",
      "# TYPE vllm:request_success_total counter",
      ...[...this.#finished].map(([r, n]) => `vllm:request_success_total{${m},finished_reason="${r}"} ${n}`),
      "# HELP deno_rl:http_requests_total HTTP requests answered, by route and status.",
      "# TYPE deno_rl:http_requests_total counter",
      ...[...this.#requests].map(([k, n]) => `deno_rl:http_requests_total{${m},${k}} ${n}`),
      "# HELP vllm:e2e_request_latency_seconds Time from receiving a request to its answer.",
      "# TYPE vllm:e2e_request_latency_seconds histogram",
      ...this.#latency.lines("vllm:e2e_request_latency_seconds"),
      "# HELP vllm:time_to_first_token_seconds Time from opening a choice to its first token.",
      "# TYPE vllm:time_to_first_token_seconds histogram",
      ...this.#firstToken.lines("vllm:time_to_first_token_seconds"),
    ];
    return out.join("\n") + "\n";
  }
}
