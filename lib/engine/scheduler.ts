/**
 * `TurnScheduler`: continuous batching over a fixed pool of KV-cache slots, as an inference server does.
 *
 * A sequence (an episode's conversation) holds one slot from `open` to `close`; its cached prefix stays in
 * the slot between turns, so a turn after a tool result costs only the new tokens. Each `generate` is one
 * turn request. A loop runs while requests are pending; at every iteration it
 *
 * 1. admits the requests that arrived since the last step, caching each one's pending tokens but the
 *    last: sequences that are fresh (nothing cached) and sit in adjacent slots are prefilled together; a
 *    sequence continuing after appended tokens is extended in a batch-1 call on its own rows
 *    (onnxruntime's CPU GroupQueryAttention takes several new tokens with a past only at batch 1);
 * 2. runs one decode step over all slots (or, with `exact: false`, over `[0, highest live slot]`),
 *    feeding each live sequence its last token; the other slots ride along, writing into the free
 *    position after their cached tokens (which their next real token overwrites), and their samples are
 *    dropped;
 * 3. resolves the turns that stopped, then yields to the event loop, so that tool calls finish and new
 *    requests arrive while the batch keeps decoding.
 *
 * An episode waiting on a tool therefore never holds up the others, and a slot freed by a finished
 * episode goes to the next one waiting in `open`. A cancelled turn (`cancel`: its HTTP client hung up)
 * leaves the batch at the next iteration, before another decode step is spent on it, and rejects with
 * an AbortError; its sequence keeps its slot until closed. Requests decoded together must share
 * sampling parameters (temperature, top-k, top-p are scalars of the graph); a request with other
 * parameters waits until the running group drains. Constraints (constraints.ts) and alternatives are
 * per sequence and need no grouping. Sampled tokens depend only on (seed, position) (seeds.ts), so
 * batching never changes what a sequence samples.
 *
 * Exactness: onnxruntime's CPU matrix products round differently for different row counts (measured:
 * the same sequence decoded in a batch of 2 and of 8 differs in the last bit of a few log-probs, and a
 * flipped near-tie would flip a token). Decoding always at the full slot width makes every log-prob
 * bit-identical whatever else is in flight and whenever tool results arrive, so a resumed run repeats an
 * uninterrupted one exactly. It costs decode work on idle slots when few sequences are live; a server
 * that does not need exactness can pass `exact: false`. Nor may a row's result depend on which slot it
 * decodes in, which arrival timing decides: the sampler's sums are CumSums for that reason (head.ts
 * `inverseCdf`; docs/ENGINE_FACTS.md, "Exact batching").
 *
 * @module
 */

import { abortError } from "./abort.ts";
import type { InferenceEngine } from "./engine.ts";
import { checkSampling, type RowConstraints, type SamplingParams } from "./feeds.ts";
import { rowConstraints } from "./constraints.ts";
import type { Alternatives } from "./engine.ts";
import type { BatchStats, GenerateOptions, Generation } from "./turn.ts";

export type { BatchStats, GenerateOptions, Generation, TokenEvent } from "./turn.ts";
import type { BatchCache } from "./kv_cache.ts";
import { samplingUniform } from "./seeds.ts";
import { yieldToEventLoop } from "./yield.ts";

interface Turn {
  options: GenerateOptions;
  sampling: SamplingParams;
  key: string;
  /** Arrival order: the oldest request's sampling parameters run first. */
  order: number;
  /** Set by `cancel`: the loop drops the turn before its next decode step. */
  cancelled: boolean;
  out: Generation;
  resolve(g: Generation): void;
  reject(e: unknown): void;
}

interface Slot {
  tokens: number[];
  /** Tokens whose keys and values are in the cache (a prefix of `tokens`). */
  cached: number;
  seed: number;
  /** Most tokens this sequence may hold (≤ the scheduler's capacity). */
  capacity: number;
  turn: Turn | null;
  /** Whether the current turn's pending tokens are cached up to the last one. */
  admitted: boolean;
}

export class TurnScheduler {
  readonly stats: BatchStats = {
    prefillTokens: 0,
    prefillMs: 0,
    decodeSteps: 0,
    decodeTokens: 0,
    decodeMs: 0,
  };
  /** Most tokens a sequence may hold. */
  readonly capacity: number;
  readonly #engine: InferenceEngine;
  readonly #cache: BatchCache;
  readonly #slots: (Slot | null)[];
  readonly #waiting: Array<() => void> = [];
  #running = false;
  #arrivals = 0;

  readonly #exact: boolean;

  /**
   * `options.lasting`: the owner keeps this scheduler (its cache) for its life, as a policy does its
   * rollouts' (engine.ts `createCache`: under graph capture such a cache is always captured).
   */
  constructor(
    engine: InferenceEngine,
    slots: number,
    capacity: number,
    options: { exact?: boolean; lasting?: boolean } = {},
  ) {
    if (!(Number.isInteger(slots) && slots >= 1)) {
      throw new RangeError(`scheduler: slots = ${slots}; use a positive integer`);
    }
    this.#engine = engine;
    this.capacity = capacity;
    this.#exact = options.exact ?? true;
    this.#slots = new Array(slots).fill(null);
    this.#cache = engine.createCache(slots, capacity + 1, options.lasting); // +1: the ride-along position
  }

  get slots(): number {
    return this.#slots.length;
  }

  /** Frees the cache's device memory now (a host cache goes with the garbage collector); unusable after. */
  release(): void {
    this.#cache.release();
  }

  /** Sequences holding a slot. */
  get open(): number {
    return this.#slots.filter((s) => s !== null).length;
  }

  /**
   * Takes a free slot for `prompt` (waiting for one if all are taken); returns the slot index. A wait
   * ends with an AbortError when `signal` fires.
   */
  async openSequence(
    prompt: readonly number[],
    seed: number,
    capacity = this.capacity,
    signal?: AbortSignal,
  ): Promise<number> {
    checkPrompt(prompt, Math.min(capacity, this.capacity));
    if (signal?.aborted) throw abortError("opening the sequence");
    let free = this.#slots.indexOf(null);
    while (free < 0) {
      await this.#waitForSlot(signal);
      free = this.#slots.indexOf(null);
    }
    this.#slots[free] = {
      tokens: [...prompt],
      cached: 0,
      seed,
      capacity: Math.min(capacity, this.capacity),
      turn: null,
      admitted: false,
    };
    return free;
  }

  /** Resolves when a slot is freed; rejects (and leaves the queue) when `signal` fires first. */
  #waitForSlot(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const wake = () => {
        signal?.removeEventListener("abort", giveUp);
        resolve();
      };
      const giveUp = () => {
        const at = this.#waiting.indexOf(wake);
        if (at >= 0) this.#waiting.splice(at, 1);
        reject(abortError("opening the sequence"));
      };
      this.#waiting.push(wake);
      signal?.addEventListener("abort", giveUp, { once: true });
    });
  }

  /**
   * Cancels the turn generating in `slot`, if any: it decodes no further token and its `generate`
   * rejects with an AbortError at the loop's next iteration (within one decode step).
   */
  cancel(slot: number): void {
    const turn = this.#slots[slot]?.turn;
    if (turn) turn.cancelled = true;
  }

  /** Frees the slot; the next sequence waiting in `openSequence` gets it. */
  close(slot: number): void {
    const s = this.#slot(slot);
    if (s.turn) throw new Error(`scheduler: slot ${slot} closed while its turn is generating`);
    this.#slots[slot] = null;
    this.#waiting.shift()?.();
  }

  /** All tokens of the sequence in `slot`. */
  tokens(slot: number): number[] {
    return [...this.#slot(slot).tokens];
  }

  /** Appends environment tokens (a tool result, a user turn); they are cached at the next turn. */
  append(slot: number, tokens: readonly number[]): void {
    const s = this.#slot(slot);
    if (s.turn) throw new Error(`scheduler: append to slot ${slot} while its turn is generating`);
    if (s.tokens.length + tokens.length >= s.capacity) {
      throw new RangeError(
        `generate: sequence ${slot} would hold ${
          s.tokens.length + tokens.length
        } tokens, capacity is ${s.capacity}`,
      );
    }
    s.tokens.push(...tokens);
  }

  /** Requests one turn for the sequence in `slot`; resolves when it stops. */
  generate(slot: number, options: GenerateOptions): Promise<Generation> {
    let s: Slot, sampling: SamplingParams;
    try {
      s = this.#slot(slot);
      if (s.turn) throw new Error(`scheduler: slot ${slot} already has a turn generating`);
      sampling = samplingOf(options);
    } catch (error) {
      return Promise.reject(error);
    }
    const out: Generation = { tokens: [], logprobs: [], finishReason: "length" };
    if ((options.topLogprobs ?? 0) > 0) out.top = [];
    if (options.maxNewTokens <= 0 || s.tokens.length >= s.capacity) return Promise.resolve(out);
    return new Promise<Generation>((resolve, reject) => {
      const key = `${sampling.temperature}|${sampling.topK}|${sampling.topP}`;
      s.turn = { options, sampling, key, order: this.#arrivals++, cancelled: false, out, resolve, reject };
      s.admitted = false;
      this.#kick();
    });
  }

  #kick(): void {
    if (this.#running) return;
    this.#running = true;
    void this.#loop();
  }

  /**
   * Runs while turns are pending. `#running` is cleared in the same synchronous stretch as the decision to
   * stop (the `finally` runs at the `return`): cleared any later, say in a `.finally` on the loop's
   * promise, a turn asked for in between finds the loop still marked running, is not started, and waits
   * forever (issue 29: a one-token turn asked for right after the previous one resolved).
   */
  async #loop(): Promise<void> {
    try {
      // One event-loop turn first, so that requests made together are admitted (and prefilled) together.
      await yieldToEventLoop();
      for (;;) {
        this.#dropCancelled();
        const group = this.#nextGroup();
        if (group.length === 0) return;
        try {
          await this.#admit(group.filter((i) => !this.#slots[i]!.admitted));
          this.#dropCancelled(); // cancelled while its prompt was being cached
          const live = group.filter((i) => this.#slots[i]?.turn);
          if (live.length > 0) await this.#decodeStep(live);
        } catch (error) {
          for (const i of group) this.#finish(i, error);
        }
        await yieldToEventLoop();
      }
    } finally {
      this.#running = false;
    }
  }

  /** Ends every cancelled turn (AbortError), so that no decode step is spent on it. */
  #dropCancelled(): void {
    this.#slots.forEach((s, i) => {
      if (s?.turn?.cancelled) this.#finish(i, abortError("the turn"));
    });
  }

  /** Slots whose turns share the sampling parameters of the oldest pending turn. */
  #nextGroup(): number[] {
    let oldest: Turn | null = null;
    for (const s of this.#slots) if (s?.turn && (!oldest || s.turn.order < oldest.order)) oldest = s.turn;
    if (!oldest) return [];
    const key = oldest.key;
    return this.#slots.flatMap((s, i) => (s?.turn?.key === key ? [i] : []));
  }

  /**
   * Brings newly requested sequences' caches up to date, up to their last pending token (which the next
   * decode step feeds): fresh sequences in adjacent slots are prefilled together, others extended alone.
   * Every sampled token therefore comes from a decode step, whether or not its sequence was prefilled
   * with others: what a sequence samples, and its log-probs bit for bit, never depend on arrival timing.
   */
  async #admit(slots: readonly number[]): Promise<void> {
    const fresh = slots.filter((i) => this.#slots[i]!.cached === 0 && this.#slots[i]!.tokens.length > 1);
    for (const i of slots) if (!fresh.includes(i)) await this.#extend(i);
    for (const run of adjacentRuns(fresh)) await this.#prefill(run);
    for (const i of slots) this.#slots[i]!.admitted = true;
  }

  /**
   * One call over adjacent fresh slots: caches all but the last token of each one's prompt. Where the
   * engine limits the new tokens of a call (`maxStepTokens`, attention_probe.ts), the call caches the
   * first piece of each prompt and the rest follows in batch-1 continuations.
   */
  async #prefill(run: readonly number[]): Promise<void> {
    const started = performance.now();
    const seqs = run.map((i) => this.#slots[i]!);
    const B = seqs.length;
    const lengths = seqs.map((s) => Math.min(s.tokens.length - 1, this.#engine.maxStepTokens));
    const S = Math.max(...lengths);
    const ids = new Array<number>(B * S).fill(0); // [B, S], right-padded
    seqs.forEach((s, b) => s.tokens.slice(0, lengths[b]).forEach((t, j) => (ids[b * S + j] = t)));
    await this.#engine.step({
      ids,
      batch: B,
      width: S,
      seqlens: lengths.map((n) => n - 1),
      sampleAt: lengths.map((n) => n - 1),
      uniforms: lengths.map(() => 0.5),
      sampling: { temperature: 0, topK: 0, topP: 1 },
      cache: this.#cache.range(run[0], run[0] + B),
    });
    seqs.forEach((s, b) => (s.cached = lengths[b]));
    this.stats.prefillTokens += lengths.reduce((a, b) => a + b, 0);
    this.stats.prefillMs += performance.now() - started;
    for (const i of run) await this.#extend(i); // the rest of prompts longer than one call may take
  }

  /**
   * Caches all but the last pending token of the sequence in `slot`: batch-1 calls on its rows, of at most
   * `maxStepTokens` new tokens each.
   */
  async #extend(slot: number): Promise<void> {
    const s = this.#slots[slot]!;
    while (s.tokens.length - 1 > s.cached) {
      const pending = s.tokens.slice(s.cached, -1).slice(0, this.#engine.maxStepTokens);
      const started = performance.now();
      await this.#engine.step({
        ids: pending,
        batch: 1,
        width: pending.length,
        seqlens: [s.cached + pending.length - 1],
        sampleAt: [pending.length - 1],
        uniforms: [0.5],
        sampling: { temperature: 0, topK: 0, topP: 1 },
        cache: this.#cache.range(slot, slot + 1),
      });
      s.cached += pending.length;
      this.stats.prefillTokens += pending.length;
      this.stats.prefillMs += performance.now() - started;
    }
  }

  /** Feeds each live sequence its last token, over all slots (exact) or `[0, highest live]`. */
  async #decodeStep(live: readonly number[]): Promise<void> {
    const started = performance.now();
    const width = this.#exact ? this.#slots.length : Math.max(...live) + 1;
    const isLive = new Set(live);
    const rows = this.#slots.slice(0, width);
    const turns = rows.map((s, b) => (isLive.has(b) ? s!.turn! : null));
    const step = await this.#engine.step({
      constraints: turns.map((t): RowConstraints | null =>
        t && rowConstraints(t.options.constraints, t.out.tokens)
      ),
      topN: Math.max(0, ...turns.map((t) => t?.options.topLogprobs ?? 0)),
      ids: rows.map((s, b) => (isLive.has(b) ? s!.tokens[s!.cached] : 0)),
      batch: width,
      width: 1,
      // Live: write the fed token at `cached`. Others: a scratch write into their free position.
      seqlens: rows.map((s) => s?.cached ?? 0),
      sampleAt: rows.map(() => 0),
      uniforms: rows.map((s) => (s ? samplingUniform(s.seed, s.cached + 1) : 0.5)),
      sampling: this.#slots[live[0]]!.turn!.sampling,
      cache: this.#cache.range(0, width),
    });
    for (const i of live) this.#slots[i]!.cached += 1;
    this.stats.decodeSteps += 1;
    this.stats.decodeTokens += live.length;
    this.stats.decodeMs += performance.now() - started;
    for (const i of live) this.#accept(i, step.tokens[i], step.logprobs[i], step.top?.[i]);
  }

  /** Records a sampled token; resolves the turn when it stops. */
  #accept(slot: number, token: number, logprob: number, top?: Alternatives): void {
    const s = this.#slots[slot]!;
    const turn = s.turn!;
    if (turn.cancelled) return this.#finish(slot, abortError("the turn")); // cancelled during the step
    s.tokens.push(token);
    const out = turn.out;
    out.tokens.push(token);
    out.logprobs.push(logprob);
    const n = turn.options.topLogprobs ?? 0;
    if (out.top && top) out.top.push({ ids: top.ids.slice(0, n), logprobs: top.logprobs.slice(0, n) });
    const index = out.tokens.length - 1;
    let asked: boolean;
    try {
      asked = turn.options.onToken?.({ index, token, logprob, top: out.top?.[index] }) === true;
    } catch (error) {
      // The caller's listener failed: its own turn ends with that error; the step's other turns go on, and
      // the sequence stays usable (the token is recorded, to be fed at its next turn).
      return this.#finish(slot, error);
    }
    if (asked || turn.options.stopTokens?.includes(token)) {
      turn.out.finishReason = "stop";
      this.#finish(slot);
    } else if (turn.out.tokens.length >= turn.options.maxNewTokens || s.tokens.length >= s.capacity) {
      this.#finish(slot);
    }
  }

  #finish(slot: number, error?: unknown): void {
    const s = this.#slots[slot];
    const turn = s?.turn;
    if (!s || !turn) return;
    s.turn = null;
    s.admitted = false;
    if (error === undefined) turn.resolve(turn.out);
    else turn.reject(error);
  }

  #slot(slot: number): Slot {
    const s = this.#slots[slot];
    if (!Number.isInteger(slot) || !s) {
      throw new RangeError(`generate: no open sequence in slot ${slot} of ${this.#slots.length}`);
    }
    return s;
  }
}

/** Splits sorted-or-not slot indices into runs of adjacent slots. */
function adjacentRuns(slots: readonly number[]): number[][] {
  const sorted = [...slots].sort((a, b) => a - b);
  const runs: number[][] = [];
  for (const i of sorted) {
    const last = runs.at(-1);
    if (last && last.at(-1)! + 1 === i) last.push(i);
    else runs.push([i]);
  }
  return runs;
}

function checkPrompt(prompt: readonly number[], capacity: number): void {
  if (prompt.length === 0) throw new RangeError("generate: the prompt is empty; give at least one token");
  if (prompt.length >= capacity) {
    throw new RangeError(
      `generate: the prompt has ${prompt.length} tokens, capacity is ${capacity}; raise the capacity`,
    );
  }
}

export function samplingOf(options: GenerateOptions): SamplingParams {
  const params = { temperature: options.temperature ?? 1, topK: options.topK ?? 0, topP: options.topP ?? 1 };
  checkSampling(params);
  if (!Number.isInteger(options.maxNewTokens) || options.maxNewTokens < 0) {
    throw new RangeError(`generate: maxNewTokens = ${options.maxNewTokens}; use a non-negative integer`);
  }
  return params;
}
