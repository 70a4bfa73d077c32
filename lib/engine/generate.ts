/**
 * `GenerationBatch`: batched, multi-turn generation over one KV cache.
 *
 * Each sequence keeps its tokens and how many of them are in the cache. The token sampled last is not
 * cached yet: it is fed by the next step. A turn (`generate`) first brings the cache up to date —
 * one batched first-prompt call when the whole batch is fresh, otherwise a batch-1 continuation per
 * sequence over a view of its cache rows for everything but its last pending token (onnxruntime's
 * GroupQueryAttention takes several new tokens with a past only at batch 1) — then decodes all the
 * turn's sequences together, one token per step, each stopping on its own. Sequences not in the turn,
 * or already stopped, ride along: they write into the free slot after their cached tokens, which
 * the next real token overwrites, and their samples are dropped.
 *
 * Continuing after a tool call costs the tool result's tokens only: the prefix stays cached.
 *
 * @module
 */

import type { InferenceEngine } from "./engine.ts";
import { checkSampling, type SamplingParams } from "./feeds.ts";
import { KvCache } from "./kv_cache.ts";
import { samplingUniform } from "./seeds.ts";

/** Options of one generation turn. */
export interface GenerateOptions {
  /** Tokens each sequence may sample in this turn. */
  maxNewTokens: number;
  /** Default 1; 0 = greedy. */
  temperature?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Default 1 (off). */
  topP?: number;
  /** Sampling one of these ends the sequence's turn (the token is kept). */
  stopTokens?: readonly number[];
}

/** What one sequence sampled in a turn. */
export interface Generation {
  tokens: number[];
  /** log p of each sampled token under softmax(logits / temperature) (temperature 1 when greedy). */
  logprobs: number[];
  finishReason: "stop" | "length";
}

/** Work counters, for benchmarks. */
export interface BatchStats {
  prefillTokens: number;
  prefillMs: number;
  decodeSteps: number;
  decodeTokens: number;
  decodeMs: number;
}

interface Sequence {
  tokens: number[];
  /** Tokens whose keys and values are in the cache (a prefix of `tokens`). */
  cached: number;
  seed: number;
}

export class GenerationBatch {
  readonly stats: BatchStats = {
    prefillTokens: 0,
    prefillMs: 0,
    decodeSteps: 0,
    decodeTokens: 0,
    decodeMs: 0,
  };
  readonly #engine: InferenceEngine;
  readonly #seqs: Sequence[];
  readonly #cache: KvCache;
  /** Most tokens a sequence may hold. */
  readonly capacity: number;

  constructor(
    engine: InferenceEngine,
    prompts: readonly (readonly number[])[],
    capacity: number,
    seeds: readonly number[],
  ) {
    if (prompts.length === 0) throw new RangeError("generate: no prompts; pass at least one");
    prompts.forEach((p, i) => {
      if (p.length === 0) throw new RangeError(`generate: prompt ${i} is empty; give at least one token`);
      if (p.length >= capacity) {
        throw new RangeError(
          `generate: prompt ${i} has ${p.length} tokens, capacity is ${capacity}; raise the capacity`,
        );
      }
    });
    this.#engine = engine;
    this.capacity = capacity;
    this.#seqs = prompts.map((p, i) => ({ tokens: [...p], cached: 0, seed: seeds[i] ?? i }));
    this.#cache = new KvCache(engine.config, prompts.length, capacity + 1); // +1: the ride-along slot
  }

  get size(): number {
    return this.#seqs.length;
  }

  /** All tokens of sequence `i` so far. */
  tokens(i: number): number[] {
    return [...this.#sequence(i).tokens];
  }

  /** Appends environment tokens (a tool result, a user turn) to sequence `i`. */
  append(i: number, tokens: readonly number[]): void {
    const seq = this.#sequence(i);
    if (seq.tokens.length + tokens.length >= this.capacity) {
      throw new RangeError(
        `generate: sequence ${i} would hold ${
          seq.tokens.length + tokens.length
        } tokens, capacity is ${this.capacity}`,
      );
    }
    seq.tokens.push(...tokens);
  }

  /** Samples a turn for sequences `which` (default all). */
  async generate(options: GenerateOptions, which?: readonly number[]): Promise<Generation[]> {
    const rows = which ? [...which] : this.#seqs.map((_, i) => i);
    rows.forEach((i) => this.#sequence(i));
    const sampling = samplingOf(options);
    const out = new Map<number, Generation>(
      rows.map((i) => [i, { tokens: [], logprobs: [], finishReason: "length" }]),
    );
    let live = rows.filter((i) => this.#seqs[i].tokens.length < this.capacity);
    if (options.maxNewTokens <= 0) live = [];
    if (live.length > 0 && this.#allFresh(live)) {
      const step = await this.#prefillAll(sampling);
      live = live.filter((i) => this.#accept(i, step.tokens[i], step.logprobs[i], out.get(i)!, options));
    } else {
      for (const i of live) await this.#extend(i);
    }
    while (live.length > 0) live = await this.#decodeStep(live, sampling, out, options);
    return rows.map((i) => out.get(i)!);
  }

  #allFresh(live: readonly number[]): boolean {
    return live.length === this.#seqs.length && this.#seqs.every((s) => s.cached === 0);
  }

  /** One batched first-prompt call over every sequence's tokens; samples each one's next token. */
  async #prefillAll(sampling: SamplingParams) {
    const started = performance.now();
    const B = this.#seqs.length;
    const S = Math.max(...this.#seqs.map((s) => s.tokens.length));
    const ids = new Array<number>(B * S).fill(0);
    this.#seqs.forEach((s, b) => s.tokens.forEach((t, j) => (ids[b * S + j] = t)));
    const step = await this.#engine.step({
      ids,
      batch: B,
      width: S,
      seqlens: this.#seqs.map((s) => s.tokens.length - 1),
      sampleAt: this.#seqs.map((s) => s.tokens.length - 1),
      uniforms: this.#seqs.map((s) => samplingUniform(s.seed, s.tokens.length)),
      sampling,
      cache: this.#cache.whole(),
    });
    for (const s of this.#seqs) {
      this.stats.prefillTokens += s.tokens.length;
      s.cached = s.tokens.length;
    }
    this.stats.prefillMs += performance.now() - started;
    return step;
  }

  /** Caches all but the last pending token of sequence `i` (a batch-1 call on its rows). */
  async #extend(i: number): Promise<void> {
    const seq = this.#seqs[i];
    const pending = seq.tokens.slice(seq.cached, -1);
    if (pending.length === 0) return;
    const started = performance.now();
    await this.#engine.step({
      ids: pending,
      batch: 1,
      width: pending.length,
      seqlens: [seq.cached + pending.length - 1],
      sampleAt: [pending.length - 1],
      uniforms: [0.5],
      sampling: { temperature: 0, topK: 0, topP: 1 },
      cache: this.#cache.row(i),
    });
    seq.cached += pending.length;
    this.stats.prefillTokens += pending.length;
    this.stats.prefillMs += performance.now() - started;
  }

  /** Feeds each live sequence's last token; returns the sequences still going. */
  async #decodeStep(
    live: readonly number[],
    sampling: SamplingParams,
    out: Map<number, Generation>,
    options: GenerateOptions,
  ): Promise<number[]> {
    const started = performance.now();
    const isLive = new Set(live);
    const step = await this.#engine.step({
      ids: this.#seqs.map((s, b) => (isLive.has(b) ? s.tokens[s.cached] : 0)),
      batch: this.#seqs.length,
      width: 1,
      // Live: write the fed token at `cached`. Others: scratch writes into their free slot.
      seqlens: this.#seqs.map((s) => s.cached),
      sampleAt: this.#seqs.map(() => 0),
      uniforms: this.#seqs.map((s) => samplingUniform(s.seed, s.cached + 1)),
      sampling,
      cache: this.#cache.whole(),
    });
    for (const i of live) this.#seqs[i].cached += 1;
    this.stats.decodeSteps += 1;
    this.stats.decodeTokens += live.length;
    this.stats.decodeMs += performance.now() - started;
    return live.filter((i) => this.#accept(i, step.tokens[i], step.logprobs[i], out.get(i)!, options));
  }

  /** Records a sampled token; returns whether the sequence goes on. */
  #accept(i: number, token: number, logprob: number, gen: Generation, options: GenerateOptions): boolean {
    const seq = this.#seqs[i];
    seq.tokens.push(token);
    gen.tokens.push(token);
    gen.logprobs.push(logprob);
    if (options.stopTokens?.includes(token)) {
      gen.finishReason = "stop";
      return false;
    }
    return gen.tokens.length < options.maxNewTokens && seq.tokens.length < this.capacity;
  }

  #sequence(i: number): Sequence {
    const seq = this.#seqs[i];
    if (!Number.isInteger(i) || !seq) {
      throw new RangeError(`generate: no sequence ${i} in a batch of ${this.#seqs.length}`);
    }
    return seq;
  }
}

function samplingOf(options: GenerateOptions): SamplingParams {
  const params = { temperature: options.temperature ?? 1, topK: options.topK ?? 0, topP: options.topP ?? 1 };
  checkSampling(params);
  if (!Number.isInteger(options.maxNewTokens) || options.maxNewTokens < 0) {
    throw new RangeError(`generate: maxNewTokens = ${options.maxNewTokens}; use a non-negative integer`);
  }
  return params;
}
