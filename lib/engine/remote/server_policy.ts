/**
 * `ServerPolicy`: the `Policy` on vLLM or SGLang servers (or `deno task serve`, which speaks vLLM's
 * API). Episodes run here; each turn is one token-in-token-out HTTP request:
 *
 * - `openSequence` keeps the sequence's tokens on this side; each `generate` sends all of them (the
 *   server's prefix cache makes the repeated prefix cheap) and appends what comes back.
 * - Each sequence sticks to one server, picked round-robin as sequences open (prefix cache again).
 * - Each request carries the sequence's seed. Our engine (`deno task serve`) draws token t from
 *   (seed, t), so turns reproduce `LocalPolicy` exactly; vLLM and SGLang seed one generator per
 *   request, so every turn of a sequence starts from the same random stream (documented in
 *   docs/serving.md; the tokens stay exactly as sampled).
 * - `logprobs` scores through the server's prompt log-probs; `setAdapter` loads the adapter on every
 *   server under a versioned name (server_adapters.ts).
 * - At start: every server's `/health`, then the log-prob semantics check (logprob_check.ts).
 *
 * @module
 */

import { hasConstraints } from "../constraints.ts";
import { abortError } from "../abort.ts";
import { checkTokens } from "../local_policy.ts";
import type { Qwen3Config } from "../../model/hf_config.ts";
import { readQwen3Config } from "../../model/hf_config.ts";
import type { Adapter } from "../../model/lora.ts";
import { UserError } from "../../errors.ts";
import type {
  BatchOptions,
  BatchStats,
  GenerateOptions,
  Generation,
  GenerationSession,
  LogprobOptions,
  Policy,
  PolicySequence,
  SequenceOptions,
} from "../policy.ts";
import { ServerClient } from "./http.ts";
import { checkLogprobSemantics, type LogprobCheck } from "./logprob_check.ts";
import type { ServerDialect } from "./protocol.ts";
import { ServerAdapters } from "./server_adapters.ts";
import { SglangDialect } from "./sglang.ts";
import { VllmDialect } from "./vllm.ts";

/** Options of `ServerPolicy.connect` (the `model.server` keys, docs/serving.md). */
export interface ServerPolicyOptions {
  backend: "vllm" | "sglang";
  urls: readonly string[];
  /** Local model directory: its config.json (and adapters are checked against it). */
  modelDir: string;
  /** The base model's name on the servers; default: the first model `/v1/models` lists. */
  modelName?: string | null;
  apiKey?: string | null;
  requestTimeoutS?: number;
  retries?: number;
  backoffS?: number;
  healthTimeoutS?: number;
  /** Adapters load as `<adapterName>@<hash>`; default "policy". */
  adapterName?: string;
  /** Shared directory to copy adapters into for the servers; default: send our own path. */
  adapterDir?: string | null;
  /** Adapter to start from. */
  adapter?: string | Adapter | null;
  /** Run the log-prob semantics check at start (default true). */
  checkLogprobs?: boolean;
}

export class ServerPolicy implements Policy {
  readonly config: Qwen3Config;
  readonly #clients: readonly ServerClient[];
  readonly #dialect: ServerDialect;
  readonly #adapters: ServerAdapters;
  readonly #stats: BatchStats = {
    prefillTokens: 0,
    prefillMs: 0,
    decodeSteps: 0,
    decodeTokens: 0,
    decodeMs: 0,
  };
  #next = 0;
  #open = 0;
  /** Result of the start-up check (null when it was skipped). */
  logprobCheck: LogprobCheck | null = null;

  private constructor(
    config: Qwen3Config,
    clients: ServerClient[],
    dialect: ServerDialect,
    adapters: ServerAdapters,
  ) {
    this.config = config;
    this.#clients = clients;
    this.#dialect = dialect;
    this.#adapters = adapters;
  }

  /** Checks every server's health, learns the base model's name, sets the adapter, runs the check. */
  static async connect(options: ServerPolicyOptions): Promise<ServerPolicy> {
    if (options.urls.length === 0) {
      throw new UserError("model.server.urls", {
        value: [],
        why: `model.backend ${options.backend} needs at least one server`,
        fix: "list the servers' base URLs, e.g. --model.server.urls=[http://127.0.0.1:8000]",
      });
    }
    const config = await readQwen3Config(options.modelDir);
    const clients = options.urls.map((url) =>
      new ServerClient(url, {
        apiKey: options.apiKey ?? null,
        requestTimeoutS: options.requestTimeoutS ?? 600,
        retries: options.retries ?? 3,
        backoffS: options.backoffS ?? 0.5,
      })
    );
    const dialect: ServerDialect = options.backend === "vllm" ? new VllmDialect() : new SglangDialect();
    await Promise.all(clients.map((c) => c.waitHealthy(options.healthTimeoutS ?? 60)));
    await Promise.all(clients.map((c) => dialect.init(c)));
    const baseModel = options.modelName ?? await dialect.baseModel(clients[0]);
    const adapters = new ServerAdapters(clients, dialect, config, {
      baseModel,
      prefix: options.adapterName ?? "policy",
      copyDir: options.adapterDir ?? null,
    });
    const policy = new ServerPolicy(config, clients, dialect, adapters);
    if (options.adapter) await policy.setAdapter(options.adapter);
    if (options.checkLogprobs ?? true) {
      policy.logprobCheck = await checkLogprobSemantics(policy, options.urls.join(", "));
    }
    return policy;
  }

  adapterId(): Promise<string> {
    return Promise.resolve(this.#adapters.id);
  }

  /** The name requests carry for the current adapter (null: the base model). */
  get adapterName(): string | null {
    return this.#adapters.currentName;
  }

  async logprobs(
    seqs: readonly (readonly number[])[],
    options: LogprobOptions = {},
  ): Promise<Float32Array[]> {
    const temperature = options.temperature ?? 1;
    if (!(temperature > 0)) {
      throw new RangeError(`logprobs: temperature = ${temperature}; use a positive number`);
    }
    if (temperature !== 1 && this.logprobCheck?.scoresTemperature === false) {
      throw new UserError("logprobs through the inference server", {
        value: temperature,
        why: "the server's prompt log-probs ignore temperature (found by the start-up check)",
        fix: "score with the local policy (the trainer recomputes log-probs itself), or use temperature 1",
      });
    }
    seqs.forEach((s, i) => checkTokens(s, i, this.config.vocab_size));
    return await Promise.all(seqs.map((tokens) => {
      const client = this.#pick();
      return this.#adapters.use((m) => this.#dialect.score(client, { tokens, temperature, ...m }));
    }));
  }

  async generate(
    prompts: readonly (readonly number[])[],
    options: GenerateOptions & BatchOptions,
  ): Promise<Generation[]> {
    const longest = Math.max(0, ...prompts.map((p) => p.length));
    const capacity = options.capacity ?? longest + Math.max(1, options.maxNewTokens);
    return await Promise.all(prompts.map(async (prompt, i) => {
      const seq = await this.openSequence(prompt, { seed: options.seeds?.[i] ?? i, capacity });
      try {
        return await seq.generate(options);
      } finally {
        await seq.close();
      }
    }));
  }

  async startBatch(
    prompts: readonly (readonly number[])[],
    options: BatchOptions & { capacity: number },
  ): Promise<GenerationSession> {
    const seqs = await Promise.all(
      prompts.map((p, i) =>
        this.openSequence(p, { seed: options.seeds?.[i] ?? i, capacity: options.capacity })
      ),
    );
    const all = seqs.map((_, i) => i);
    return {
      size: seqs.length,
      generate: (o, which) => Promise.all((which ?? all).map((i) => seqs[i].generate(o))),
      append: (i, tokens) => seqs[i].append(tokens),
      tokens: (i) => seqs[i].tokens(),
      stats: () => this.sequenceStats(),
      close: async () => {
        await Promise.all(seqs.map((s) => s.close()));
      },
    };
  }

  // deno-lint-ignore require-await
  async openSequence(prompt: readonly number[], options: SequenceOptions): Promise<PolicySequence> {
    checkTokens(prompt, 0, this.config.vocab_size);
    if (options.signal?.aborted) throw abortError("opening the sequence");
    if (prompt.length >= options.capacity) {
      throw new RangeError(
        `generate: the prompt has ${prompt.length} tokens, capacity is ${options.capacity}; raise the capacity`,
      );
    }
    const client = this.#pick();
    const tokens = [...prompt];
    let sent = 0;
    let closed = false;
    this.#open += 1;
    const live = () => {
      if (closed) throw new Error("generate: the sequence is closed");
    };
    const sequence: PolicySequence = {
      generate: async (o) => {
        live();
        if (hasConstraints(o.constraints) || (o.topLogprobs ?? 0) > 0) {
          throw new RangeError(
            "generate: constraints and top log-probs are not sent to inference servers; use the local engine",
          );
        }
        const maxTokens = Math.min(o.maxNewTokens, options.capacity - tokens.length);
        const started = performance.now();
        const turn = await this.#adapters.use((m) =>
          this.#dialect.generate(client, {
            tokens,
            options: o,
            seed: options.seed,
            maxTokens,
            signal: options.signal,
            ...m,
          })
        );
        this.#count(tokens.length - sent, turn.tokens.length, performance.now() - started);
        tokens.push(...turn.tokens);
        sent = tokens.length;
        // Not streamed: the listener hears every token once the turn is back.
        turn.tokens.forEach((token, index) => o.onToken?.({ index, token, logprob: turn.logprobs[index] }));
        return turn;
      },
      append: (more) => {
        live();
        checkTokens(more, 0, this.config.vocab_size, true);
        if (tokens.length + more.length >= options.capacity) {
          throw new RangeError(
            `generate: the sequence would hold ${
              tokens.length + more.length
            } tokens, capacity is ${options.capacity}`,
          );
        }
        tokens.push(...more);
        return Promise.resolve();
      },
      tokens: () => Promise.resolve([...tokens]),
      close: () => {
        if (!closed) this.#open -= 1;
        closed = true;
        return Promise.resolve();
      },
    };
    return sequence;
  }

  sequenceStats(): Promise<BatchStats> {
    return Promise.resolve({ ...this.#stats });
  }

  async setAdapter(adapter: string | Adapter | null): Promise<void> {
    if (this.#open > 0) throw new Error("setAdapter: close the open generation batches and sequences first");
    await this.#adapters.set(adapter);
  }

  /** Unloads the adapters this policy loaded; the servers keep running. */
  async close(): Promise<void> {
    await this.#adapters.unloadAll();
  }

  /** The next server, round-robin. */
  #pick(): ServerClient {
    const client = this.#clients[this.#next % this.#clients.length];
    this.#next += 1;
    return client;
  }

  /** Counts a turn: tokens the server had not seen as prefill, sampled tokens as decode. */
  #count(newTokens: number, sampled: number, ms: number): void {
    this.#stats.prefillTokens += newTokens;
    this.#stats.decodeTokens += sampled;
    this.#stats.decodeSteps += sampled;
    this.#stats.decodeMs += ms;
  }
}
