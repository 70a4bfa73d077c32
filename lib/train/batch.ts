/**
 * From episodes (token lists with per-token mask and the per-token inputs the algorithm declares:
 * algorithm.ts) to the train graph's micro-batches: aggregation weights over the whole optimizer batch,
 * packing under a token budget, and the one-position shift between a token and the row whose logits
 * predict it.
 *
 * Aggregations (docs/DESIGN.md), as a weight per token so that a micro-batch's loss is `Σ weight · l`:
 *   token_mean               m / Σ m                         (over the whole batch)
 *   seq_mean_token_mean      m / (Σ_t m_i · E)               E = episodes with at least one masked token
 *   seq_mean_token_sum_norm  m / (N_episodes · max_response_tokens)     (Dr. GRPO)
 * A batch without masked tokens gets zero weights (zero loss, zero gradient), never a division by zero.
 * Token 0 never counts: no logits predict it.
 *
 * @module
 */

import { packRows } from "../engine/pack.ts";

/** One training episode; per-token arrays are aligned with `tokens` (entry t describes token t). */
export interface TrainEpisode {
  tokens: ArrayLike<number>;
  lossMask: ArrayLike<number>;
  /**
   * The algorithm's per-token inputs by graph-input name (objective.ts `TokenInput`): e.g. the rollout
   * log-probs as `old_logprobs`, `advantages`, and `ref_logprobs` once the trainer computed them.
   */
  inputs: Readonly<Record<string, ArrayLike<number>>>;
}

export type Aggregation = "token_mean" | "seq_mean_token_mean" | "seq_mean_token_sum_norm";

/** Per-token loss weights of every episode (aligned with its tokens). */
export function aggregationWeights(
  episodes: readonly TrainEpisode[],
  aggregation: Aggregation,
  maxResponseTokens: number,
): Float32Array[] {
  const masked = episodes.map((e) => sumOf(e.lossMask));
  const total = masked.reduce((a, b) => a + b, 0);
  const withTokens = masked.filter((m) => m > 0).length;
  return episodes.map((e, i) => {
    const scale = aggregation === "seq_mean_token_mean"
      ? (masked[i] > 0 ? 1 / (masked[i] * withTokens) : 0)
      : aggregation === "seq_mean_token_sum_norm"
      ? 1 / (episodes.length * maxResponseTokens)
      : (total > 0 ? 1 / total : 0);
    return Float32Array.from(e.lossMask, (m, t) => (m && t > 0 ? scale : 0));
  });
}

/**
 * A micro-batch as the train graph takes it: B rows of T positions, right-padded, N = B · T. The head
 * runs only on the M positions that carry loss weight (`headRows`, padded with weightless repeats of
 * position 0 to a multiple of the chunk): prompts and padding cost no vocabulary work.
 */
export interface MicroBatch {
  /** Episode index of each row. */
  episodes: number[];
  rows: number;
  width: number;
  ids: BigInt64Array; // [B, T]
  positions: BigInt64Array; // [B, T]
  /** Flat positions (b · T + i) the head computes, [M]. */
  headRows: BigInt64Array;
  /** How many of `headRows` are real (the rest is padding). */
  headCount: number;
  targets: BigInt64Array; // [M]: token i + 1 of the row
  weights: Float32Array; // [M]
  /** The episodes' per-token inputs at the head rows, by graph-input name, each `[M]`. */
  inputs: Record<string, Float32Array>;
  /** Head rows per chunk; divides M. */
  chunk: number;
}

/** Row widths are padded to a multiple of this. */
const WIDTH_STEP = 32;
/** Head rows are padded to a multiple of this, so that M has divisors near the head's chunk size. */
const HEAD_STEP = 32;

/**
 * Packs episodes into micro-batches of at most `tokenBudget` padded positions (an episode longer than
 * the budget gets a micro-batch of its own) and lays out their rows.
 */
export function planMicroBatches(
  episodes: readonly TrainEpisode[],
  weights: readonly Float32Array[],
  tokenBudget: number,
  maxChunk: number,
): MicroBatch[] {
  const widths = episodes.map((e) => roundUp(e.tokens.length, WIDTH_STEP));
  return packRows(widths, tokenBudget).map((group) => layOut(group, episodes, weights, maxChunk));
}

function layOut(
  group: number[],
  episodes: readonly TrainEpisode[],
  weights: readonly Float32Array[],
  maxChunk: number,
): MicroBatch {
  const B = group.length;
  const T = roundUp(Math.max(...group.map((i) => episodes[i].tokens.length)), WIDTH_STEP);
  const ids = new BigInt64Array(B * T), positions = new BigInt64Array(B * T);
  const head: { at: number; e: TrainEpisode; t: number; w: number }[] = [];
  group.forEach((index, b) => {
    const e = episodes[index], L = e.tokens.length;
    for (let i = 0; i < T; i++) positions[b * T + i] = BigInt(i);
    for (let i = 0; i < L; i++) ids[b * T + i] = BigInt(e.tokens[i]);
    // Row position i predicts token i + 1; only weighted predictions go to the head.
    for (let i = 0; i + 1 < L; i++) {
      if (weights[index][i + 1] !== 0) head.push({ at: b * T + i, e, t: i + 1, w: weights[index][i + 1] });
    }
  });
  const M = roundUp(Math.max(head.length, 1), HEAD_STEP);
  const column = (f: (h: typeof head[number]) => number) =>
    Float32Array.from({ length: M }, (_, j) => (j < head.length ? f(head[j]) : 0));
  const inputs: Record<string, Float32Array> = {};
  for (const name of sharedInputs(group.map((i) => episodes[i]))) {
    inputs[name] = column((h) => h.e.inputs[name][h.t]);
  }
  return {
    episodes: group,
    rows: B,
    width: T,
    ids,
    positions,
    headRows: BigInt64Array.from({ length: M }, (_, j) => BigInt(j < head.length ? head[j].at : 0)),
    headCount: head.length,
    targets: BigInt64Array.from(
      { length: M },
      (_, j) => BigInt(j < head.length ? head[j].e.tokens[head[j].t] : 0),
    ),
    weights: column((h) => h.w),
    inputs,
    chunk: largestDivisorAtMost(M, maxChunk),
  };
}

/**
 * Per-token values of the micro-batch's row `row` (aligned with its `length` tokens) from a head
 * output `[M]`; tokens the head did not compute (token 0, unweighted ones) are NaN.
 */
export function unshift(out: Float32Array, mb: MicroBatch, row: number, length: number): Float32Array {
  const values = new Float32Array(length).fill(NaN);
  const first = row * mb.width;
  for (let j = 0; j < mb.headCount; j++) {
    const i = Number(mb.headRows[j]) - first;
    if (i >= 0 && i + 1 < length) values[i + 1] = out[j];
  }
  return values;
}

/** The input names every episode of a micro-batch carries, in the first episode's order. */
function sharedInputs(group: readonly TrainEpisode[]): string[] {
  return Object.keys(group[0]?.inputs ?? {}).filter((name) =>
    group.every((e) => e.inputs[name] !== undefined)
  );
}

function largestDivisorAtMost(n: number, limit: number): number {
  for (let d = Math.min(n, limit); d > 1; d--) if (n % d === 0) return d;
  return 1;
}

function roundUp(n: number, step: number): number {
  return Math.ceil(n / step) * step;
}

/** Masked tokens of an episode; token 0 never counts (nothing predicts it). */
function sumOf(mask: ArrayLike<number>): number {
  let s = 0;
  for (let i = 1; i < mask.length; i++) s += mask[i] ? 1 : 0;
  return s;
}
