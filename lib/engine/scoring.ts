/**
 * Scoring: the log-probs of given sequences (and, for `deno task serve`, the k most likely tokens at each
 * position) through the inference graph's score mode, for `InferenceEngine.score`.
 *
 * Sequences are packed into calls without a cache (an empty past), each scoring every position of its
 * rows at once. Where the engine limits the new tokens of a call (`maxStepTokens`: a provider whose
 * attention is wrong for long calls, attention_probe.ts), each sequence is scored in pieces instead, each
 * piece continuing after the keys and values the earlier ones left in a cache of its own: the same
 * log-probs up to rounding.
 *
 * @module
 */

import type { Qwen3Config } from "../model/hf_config.ts";
import type { BatchCache, CacheBinding, CacheIO } from "./kv_cache.ts";
import { cacheIO } from "./kv_cache.ts";
import { bool, constraintFeeds, int32, int64, samplingFeeds } from "./feeds.ts";
import { IO } from "./infer_graph.ts";
import { packRows } from "./pack.ts";
import type { BoundTensor, Feed } from "./engine_session.ts";

/** What scoring needs of the engine. */
export interface ScoringEngine {
  readonly config: Qwen3Config;
  readonly maxStepTokens: number;
  /**
   * The current adapter's feeds: the Linear stacks with it merged in, or its per-group inputs (none
   * without an adapter shape).
   */
  adapterFeeds(): Record<string, BoundTensor>;
  createCache(batch: number, capacity: number): BatchCache;
  /** An empty cache (no positions) for calls that need none. */
  emptyCache(batch: number): CacheBinding;
  /** A cache's past inputs and present outputs, bound to the session. */
  bindCache(cache: CacheBinding): CacheIO<BoundTensor>;
  run(inputs: Record<string, Feed>, outputs: Record<string, Feed>): Promise<void>;
}

/** The most likely tokens at one position, most likely first, with their log-probs. */
export interface Alternatives {
  ids: number[];
  logprobs: number[];
}

/** Log-probs of a scored sequence plus, per position, its alternatives (entry 0 has none). */
export interface ScoredWithAlternatives {
  logprobs: Float32Array;
  top: (Alternatives | null)[];
}

/** The k alternatives of every scored row, flat: `[rows · k]` ids and log-probs. */
interface Alternatives2D {
  k: number;
  ids: BigInt64Array;
  logprobs: Float32Array;
}

/** One scoring call's rows (`[B, S]` ids and targets), cache and outputs. */
interface ScoreRun {
  ids: ArrayLike<number>;
  targets: ArrayLike<number>;
  batch: number;
  width: number;
  /** Per row: its last position (cached + new tokens - 1). */
  seqlens: readonly number[];
  /** The cache's past inputs and present outputs (none for a call without a cache). */
  cache: CacheIO<Feed>;
  temperature: number;
  /** `[B · S]`, written by the run. */
  logprobs: Float32Array;
  alternatives?: Alternatives2D;
}

export class Scorer {
  readonly #engine: ScoringEngine;

  constructor(engine: ScoringEngine) {
    this.#engine = engine;
  }

  /**
   * Log-probs of each sequence's tokens: entry 0 NaN, entry t = log p(seq[t] | seq[<t]) under
   * softmax(logits / temperature). Sequences are packed into calls of at most `tokenBudget` padded
   * tokens (a longer sequence gets a call of its own).
   */
  async score(
    seqs: readonly (readonly number[])[],
    temperature: number,
    tokenBudget: number,
  ): Promise<Float32Array[]> {
    const out: Float32Array[] = new Array(seqs.length);
    for (const group of packRows(seqs.map((s) => s.length), tokenBudget)) {
      const rows = group.map((i) => seqs[i]);
      const lps = await this.#call(rows, temperature);
      group.forEach((i, j) => (out[i] = lps[j]));
    }
    return out;
  }

  /**
   * `score` plus the `k` most likely tokens at every position (position t: the alternatives to token t,
   * given the tokens before it), from the same pass over the head as `score`'s log-probs.
   */
  async scoreWithAlternatives(
    seqs: readonly (readonly number[])[],
    temperature: number,
    k: number,
  ): Promise<ScoredWithAlternatives[]> {
    const out: ScoredWithAlternatives[] = [];
    for (const seq of seqs) {
      const top = { ids: new BigInt64Array(seq.length * k), logprobs: new Float32Array(seq.length * k) };
      const [logprobs] = await this.#call([seq], temperature, { k, ...top });
      out.push({
        logprobs,
        top: Array.from({ length: seq.length }, (_, t) =>
          t === 0 ? null : {
            ids: Array.from(top.ids.subarray((t - 1) * k, t * k), Number),
            logprobs: Array.from(top.logprobs.subarray((t - 1) * k, t * k)),
          }),
      });
    }
    return out;
  }

  async #call(
    rows: readonly (readonly number[])[],
    temperature: number,
    alternatives?: Alternatives2D,
  ): Promise<Float32Array[]> {
    if (Number.isFinite(this.#engine.maxStepTokens)) {
      const out: Float32Array[] = [];
      for (const row of rows) out.push(await this.#inPieces(row, temperature, alternatives));
      return out;
    }
    const B = rows.length;
    const S = Math.max(...rows.map((r) => r.length));
    const ids = new Array<number>(B * S).fill(0);
    const targets = new Array<number>(B * S).fill(0);
    rows.forEach((r, b) =>
      r.forEach((t, i) => {
        ids[b * S + i] = t;
        if (i > 0) targets[b * S + i - 1] = t;
      })
    );
    const flat = new Float32Array(B * S); // [B*S]
    await this.#run({
      ids,
      targets,
      batch: B,
      width: S,
      seqlens: rows.map((r) => r.length - 1),
      cache: { past: cacheIO(this.#engine.emptyCache(B), (t) => t).past, present: {} }, // [B, nKV, 0, D]: no cache
      temperature,
      logprobs: flat,
      alternatives,
    });
    return rows.map((r, b) => {
      const lp = new Float32Array(r.length);
      lp[0] = NaN;
      lp.set(flat.subarray(b * S, b * S + r.length - 1), 1);
      return lp;
    });
  }

  /**
   * Scores one sequence in pieces of at most `maxStepTokens` tokens, each continuing after the cached
   * keys and values of the ones before (a provider whose attention is wrong for longer calls,
   * attention_probe.ts). The same log-probs as one call, up to rounding.
   */
  async #inPieces(seq: readonly number[], temperature: number, alternatives?: Alternatives2D) {
    const n = seq.length;
    const lp = new Float32Array(n);
    lp[0] = NaN;
    const cache = this.#engine.createCache(1, n);
    try {
      const io = this.#engine.bindCache(cache.range(0, 1));
      for (let start = 0; start < n; start += this.#engine.maxStepTokens) {
        const piece = seq.slice(start, start + this.#engine.maxStepTokens);
        const c = piece.length;
        const out = new Float32Array(c); // out[i] = log p(seq[start + i + 1])
        const k = alternatives?.k ?? 0;
        await this.#run({
          ids: piece,
          targets: piece.map((_, i) => seq[start + i + 1] ?? 0),
          batch: 1,
          width: c,
          seqlens: [start + c - 1],
          cache: io,
          temperature,
          logprobs: out,
          alternatives: alternatives && {
            k,
            ids: alternatives.ids.subarray(start * k, (start + c) * k),
            logprobs: alternatives.logprobs.subarray(start * k, (start + c) * k),
          },
        });
        lp.set(out.subarray(0, Math.min(c, n - 1 - start)), start + 1);
      }
    } finally {
      cache.release();
    }
    return lp;
  }

  /** One scoring call: target log-probs (and alternatives) of every row, written into the given arrays. */
  async #run(call: ScoreRun): Promise<void> {
    const { batch: B, width: S } = call;
    const feeds = {
      ...this.#engine.adapterFeeds(),
      ...call.cache.past,
      ...samplingFeeds(
        { temperature: call.temperature, topK: 0, topP: 1 },
        new Array(B).fill(0.5),
        this.#engine.config.vocab_size,
      ),
      [IO.ids]: int64(call.ids, [B, S]),
      [IO.seqlens]: int32(call.seqlens, [B]),
      [IO.total]: int32([Math.max(...call.seqlens) + 1], []),
      [IO.scoreMode]: bool(true),
      [IO.targets]: int64(call.targets, [B, S]),
      [IO.sampleRows]: int64(Array.from({ length: B }, (_, b) => b * S), [B]),
      ...constraintFeeds(undefined, B),
      [IO.topN]: int64([0], [1]),
      [IO.scoreTop]: int64([call.alternatives?.k ?? 0], [1]),
    };
    const fetched: Record<string, Feed> = {
      ...call.cache.present,
      [IO.targetLogprobs]: { type: "float32", data: call.logprobs, dims: [B * S] },
    };
    if (call.alternatives) {
      const dims = [B * S, call.alternatives.k];
      fetched[IO.scoreTopIds] = { type: "int64", data: call.alternatives.ids, dims };
      fetched[IO.scoreTopLogprobs] = { type: "float32", data: call.alternatives.logprobs, dims };
    }
    await this.#engine.run(feeds, fetched);
  }
}
