/**
 * From episodes (token lists with per-token mask, advantages and rollout log-probs) to the train
 * graph's micro-batches: aggregation weights over the whole optimizer batch, packing under a token
 * budget, and the one-position shift between a token and the row whose logits predict it.
 *
 * Aggregations (DESIGN.md), as a weight per token so that a micro-batch's loss is `Σ weight · l`:
 *   token_mean               m / Σ m                         (over the whole batch)
 *   seq_mean_token_mean      m / (Σ_t m_i · E)               E = episodes with at least one masked token
 *   seq_mean_token_sum_norm  m / (N_episodes · max_response_tokens)     (Dr. GRPO)
 *   sft                      as token_mean, with l = -lp
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
  advantages: ArrayLike<number>;
  /** Rollout log-probs (the "old" policy), at the sampling temperature. */
  oldLogprobs: ArrayLike<number>;
  /** Reference (adapter off) log-probs, when the loss has a KL term. */
  refLogprobs?: ArrayLike<number>;
}

export type Aggregation = "token_mean" | "seq_mean_token_mean" | "seq_mean_token_sum_norm" | "sft";

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

/** A micro-batch as the train graph takes it: B rows of T positions, right-padded. */
export interface MicroBatch {
  /** Episode index of each row. */
  episodes: number[];
  rows: number;
  width: number;
  ids: BigInt64Array; // [B, T]
  positions: BigInt64Array; // [B, T]
  targets: BigInt64Array; // [B, T]: token i + 1 of the row
  weights: Float32Array; // [B, T]
  old: Float32Array; // [B, T]
  advantages: Float32Array; // [B, T]
  ref?: Float32Array; // [B, T]
  /** Rows per head chunk; divides B · T. */
  chunk: number;
}

/** Widths are padded to a multiple of this, so that B · T has divisors near the head's chunk size. */
const WIDTH_STEP = 32;

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
  const withRef = group.every((i) => episodes[i].refLogprobs !== undefined);
  const mb: MicroBatch = {
    episodes: group,
    rows: B,
    width: T,
    ids: new BigInt64Array(B * T),
    positions: new BigInt64Array(B * T),
    targets: new BigInt64Array(B * T),
    weights: new Float32Array(B * T),
    old: new Float32Array(B * T),
    advantages: new Float32Array(B * T),
    ref: withRef ? new Float32Array(B * T) : undefined,
    chunk: largestDivisorAtMost(B * T, maxChunk),
  };
  group.forEach((e, b) => fillRow(mb, b * T, T, episodes[e], weights[e]));
  return mb;
}

/** Row `at…at+T`: ids and positions for every token, and the shifted per-token arrays. */
function fillRow(mb: MicroBatch, at: number, T: number, e: TrainEpisode, w: Float32Array): void {
  const L = e.tokens.length;
  for (let i = 0; i < T; i++) mb.positions[at + i] = BigInt(i);
  for (let i = 0; i < L; i++) mb.ids[at + i] = BigInt(e.tokens[i]);
  for (let i = 0; i + 1 < L; i++) { // row position i predicts token i + 1
    mb.targets[at + i] = BigInt(e.tokens[i + 1]);
    mb.weights[at + i] = w[i + 1];
    mb.old[at + i] = e.oldLogprobs[i + 1];
    mb.advantages[at + i] = e.advantages[i + 1];
    if (mb.ref) mb.ref[at + i] = e.refLogprobs![i + 1];
  }
}

/** Per-token values of an episode (aligned with its tokens) from a row output `[B·T]`; entry 0 NaN. */
export function unshift(out: Float32Array, mb: MicroBatch, row: number, length: number): Float32Array {
  const values = new Float32Array(length);
  values[0] = NaN;
  values.set(out.subarray(row * mb.width, row * mb.width + length - 1), 1);
  return values;
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
