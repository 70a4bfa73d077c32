/**
 * `LocalPolicy`: the `Policy` on the calling thread. `loadPolicy` runs one inside a Worker
 * (worker.ts); tests and the worker itself use it directly.
 *
 * The graph is built for adapters of one rank and target set. Setting an adapter of that shape is a new
 * feed: merged into the Linears first where the policy merges (merged_weights.ts; one CPU run), per group
 * of Linears where it does not; another shape rebuilds the graph (seconds for a large model).
 *
 * @module
 */

import { openModelDir } from "../model/model_dir.ts";
import type { ModelDir } from "../model/model_dir.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { type Adapter, loraScale, sameLoraShape } from "../model/lora.ts";
import { readPeftAdapter } from "../model/peft.ts";
import { adapterId } from "../model/adapter_id.ts";
import { abortError } from "./abort.ts";
import { InferenceEngine } from "./engine.ts";
import { type BatchStats, type GenerateOptions, type Generation, GenerationBatch } from "./generate.ts";
import type {
  BatchOptions,
  GenerationSession,
  LogprobOptions,
  Policy,
  PolicyOptions,
  PolicySequence,
  ScoredWithAlternatives,
  SequenceOptions,
} from "./policy.ts";
import { TurnScheduler } from "./scheduler.ts";

const DEFAULT_TOKEN_BUDGET = 4096;
const DEFAULT_MAX_SEQUENCES = 32;

export class LocalPolicy implements Policy {
  readonly config: Qwen3Config;
  readonly #model: ModelDir;
  readonly #options: PolicyOptions;
  #engine: InferenceEngine;
  #adapter: Adapter | null = null;
  #adapterId = "base";
  #open = 0;
  /** The continuous-batching scheduler of `openSequence`, made on first use. */
  #scheduler: TurnScheduler | null = null;
  readonly #sequenceStats: BatchStats = {
    prefillTokens: 0,
    prefillMs: 0,
    decodeSteps: 0,
    decodeTokens: 0,
    decodeMs: 0,
  };

  private constructor(model: ModelDir, engine: InferenceEngine, options: PolicyOptions) {
    this.config = model.config;
    this.#model = model;
    this.#engine = engine;
    this.#options = options;
  }

  /** Opens the model directory, builds the graph and loads `options.adapter` if given. */
  static async load(modelDir: string, options: PolicyOptions = {}): Promise<LocalPolicy> {
    const model = await openModelDir(modelDir);
    const adapter = typeof options.adapter === "string"
      ? await readPeftAdapter(options.adapter, model.config)
      : options.adapter ?? null;
    const shape = adapter?.spec ?? options.lora ?? null;
    const engine = await InferenceEngine.create(model, shape, options);
    const policy = new LocalPolicy(model, engine, options);
    if (adapter) await policy.setAdapter(adapter);
    return policy;
  }

  adapterId(): Promise<string> {
    return Promise.resolve(this.#adapterId);
  }

  logprobs(seqs: readonly (readonly number[])[], options: LogprobOptions = {}): Promise<Float32Array[]> {
    const temperature = options.temperature ?? 1;
    if (!(temperature > 0)) {
      throw new RangeError(`logprobs: temperature = ${temperature}; use a positive number`);
    }
    seqs.forEach((s, i) => checkTokens(s, i, this.config.vocab_size));
    return this.#engine.score(seqs, temperature, this.#options.tokenBudget ?? DEFAULT_TOKEN_BUDGET);
  }

  scoreWithAlternatives(
    seqs: readonly (readonly number[])[],
    options: LogprobOptions & { k: number },
  ): Promise<ScoredWithAlternatives[]> {
    const temperature = options.temperature ?? 1;
    if (!(temperature > 0)) {
      throw new RangeError(`logprobs: temperature = ${temperature}; use a positive number`);
    }
    if (!Number.isInteger(options.k) || options.k < 1 || options.k > this.config.vocab_size) {
      throw new RangeError(`logprobs: k = ${options.k}; use an integer in 1..${this.config.vocab_size}`);
    }
    seqs.forEach((s, i) => checkTokens(s, i, this.config.vocab_size));
    return this.#engine.scoreWithAlternatives(seqs, temperature, options.k);
  }

  async generate(
    prompts: readonly (readonly number[])[],
    options: GenerateOptions & BatchOptions,
  ): Promise<Generation[]> {
    const longest = Math.max(0, ...prompts.map((p) => p.length));
    const batch = await this.startBatch(prompts, {
      seeds: options.seeds,
      capacity: options.capacity ?? longest + Math.max(1, options.maxNewTokens),
    });
    try {
      return await batch.generate(options);
    } finally {
      await batch.close();
    }
  }

  startBatch(
    prompts: readonly (readonly number[])[],
    options: BatchOptions & { capacity: number },
  ): Promise<GenerationSession> {
    prompts.forEach((p, i) => checkTokens(p, i, this.config.vocab_size));
    const batch = new GenerationBatch(this.#engine, prompts, options.capacity, options.seeds ?? []);
    this.#open += 1;
    let closed = false;
    const session: GenerationSession = {
      size: batch.size,
      generate: (o, which) => {
        if (closed) throw new Error("generate: the batch is closed");
        return batch.generate(o, which);
      },
      append: (i, tokens) => {
        checkTokens(tokens, i, this.config.vocab_size, true);
        return Promise.resolve(batch.append(i, tokens));
      },
      tokens: (i) => Promise.resolve(batch.tokens(i)),
      stats: (): Promise<BatchStats> => Promise.resolve({ ...batch.stats }),
      close: () => {
        if (!closed) {
          this.#open -= 1;
          batch.release();
        }
        closed = true;
        return Promise.resolve();
      },
    };
    return Promise.resolve(session);
  }

  async openSequence(prompt: readonly number[], options: SequenceOptions): Promise<PolicySequence> {
    checkTokens(prompt, 0, this.config.vocab_size);
    const scheduler = this.#schedulerFor(options.capacity);
    const { signal } = options;
    const slot = await scheduler.openSequence(prompt, options.seed, options.capacity, signal);
    this.#open += 1;
    let closed = false;
    const live = () => {
      if (closed) throw new Error("generate: the sequence is closed");
      return slot;
    };
    // Removed at close: the slot may go to another sequence, whose turns this signal must not touch.
    const cancel = () => scheduler.cancel(slot);
    signal?.addEventListener("abort", cancel, { once: true });
    return {
      generate: async (o) => {
        if (signal?.aborted) throw abortError("the turn");
        return await scheduler.generate(live(), o);
      },
      append: (tokens) => {
        checkTokens(tokens, 0, this.config.vocab_size, true);
        return Promise.resolve(scheduler.append(live(), tokens));
      },
      tokens: () => Promise.resolve(scheduler.tokens(live())),
      close: () => {
        if (closed) return Promise.resolve();
        try {
          scheduler.close(slot); // refused while a turn generates: the sequence stays open, to close later
        } catch (error) {
          return Promise.reject(error);
        }
        closed = true;
        this.#open -= 1;
        signal?.removeEventListener("abort", cancel);
        return Promise.resolve();
      },
    };
  }

  sequenceStats(): Promise<BatchStats> {
    const now = this.#scheduler?.stats;
    const sum = { ...this.#sequenceStats };
    if (now) { for (const k of Object.keys(sum) as (keyof BatchStats)[]) sum[k] += now[k]; }
    return Promise.resolve(sum);
  }

  /**
   * The scheduler, made (or remade, while no sequence is open) with room for `capacity` tokens per slot.
   * Its cache is `maxSequences × capacity` positions per layer, allocated once.
   */
  #schedulerFor(capacity: number): TurnScheduler {
    const current = this.#scheduler;
    if (current && current.capacity >= capacity) return current;
    if (current && current.open > 0) {
      throw new RangeError(
        `openSequence: capacity ${capacity} exceeds the ${current.capacity} of the sequences already open; ` +
          "open every sequence of a rollout with the same capacity",
      );
    }
    this.#retireScheduler();
    this.#scheduler = new TurnScheduler(
      this.#engine,
      this.#options.maxSequences ?? DEFAULT_MAX_SEQUENCES,
      capacity,
      { exact: this.#options.exactBatching, lasting: true },
    );
    return this.#scheduler;
  }

  /** Drops the scheduler (its cache), keeping its counters. */
  #retireScheduler(): void {
    const old = this.#scheduler?.stats;
    if (old) { for (const k of Object.keys(old) as (keyof BatchStats)[]) this.#sequenceStats[k] += old[k]; }
    this.#scheduler?.release();
    this.#scheduler = null;
  }

  async setAdapter(adapter: string | Adapter | null): Promise<void> {
    if (this.#open > 0) throw new Error("setAdapter: close the open generation batches and sequences first");
    const next = typeof adapter === "string" ? await readPeftAdapter(adapter, this.config) : adapter;
    if (next && !sameLoraShape(next.spec, this.#engine.lora)) {
      this.#retireScheduler(); // its cache is bound to the old engine
      const engine = await InferenceEngine.create(this.#model, next.spec, this.#options);
      await this.#engine.close();
      this.#engine = engine;
    }
    await this.#engine.setLoraWeights(next?.weights ?? null, next ? loraScale(next.spec) : 0);
    this.#adapter = next;
    this.#adapterId = await adapterId(next, this.config);
  }

  /** The adapter currently applied (null: the base model). */
  get adapter(): Adapter | null {
    return this.#adapter;
  }

  async close(): Promise<void> {
    this.#retireScheduler();
    await this.#engine.close();
  }
}

/** Throws a RangeError naming sequence `i` unless every token is an id of the vocabulary. */
export function checkTokens(seq: readonly number[], i: number, vocab: number, allowEmpty = false): void {
  if (!allowEmpty && seq.length === 0) {
    throw new RangeError(`sequence ${i} is empty; give at least one token`);
  }
  for (const t of seq) {
    if (!Number.isInteger(t) || t < 0 || t >= vocab) {
      throw new RangeError(`sequence ${i}: token ${t} is outside the vocabulary 0..${vocab - 1}`);
    }
  }
}
