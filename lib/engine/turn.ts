/**
 * What one generation turn asks for and returns (`GenerateOptions`, `Generation`, `TokenEvent`), and the
 * work counters of a scheduler: the types the scheduler (scheduler.ts) and every `Policy` share.
 *
 * @module
 */

import type { SamplingConstraints } from "./constraints.ts";
import type { Alternatives } from "./engine.ts";

/** Options of one generation turn. */
export interface GenerateOptions {
  /** Tokens the sequence may sample in this turn. */
  maxNewTokens: number;
  /** Default 1; 0 = greedy. */
  temperature?: number;
  /** Default 0 (off). */
  topK?: number;
  /** Default 1 (off). */
  topP?: number;
  /** Sampling one of these ends the turn (the token is kept). */
  stopTokens?: readonly number[];
  /** What may be sampled (constraints.ts); absent: anything. */
  constraints?: SamplingConstraints;
  /** The most likely tokens to report beside each sampled one (default 0: none). */
  topLogprobs?: number;
  /**
   * Called after each sampled token (streaming). Returning true asks the turn to end ("stop"); a policy
   * in a Worker may sample a few more tokens before it hears, so the caller cuts the turn itself.
   * Not sent across a Worker as is (worker_policy.ts relays it).
   */
  onToken?: (event: TokenEvent) => boolean | void;
}

/** One sampled token, as `onToken` sees it. */
export interface TokenEvent {
  /** Position in the turn (0 = its first token). */
  index: number;
  token: number;
  logprob: number;
  top?: Alternatives;
}

/** What one sequence sampled in a turn. */
export interface Generation {
  tokens: number[];
  /**
   * log p of each sampled token under softmax(logits / temperature) (temperature 1 when greedy), after
   * the turn's constraints (the distribution it was drawn from) and before top-k / top-p.
   */
  logprobs: number[];
  /** Per token, when `topLogprobs` > 0: the most likely tokens of the same distribution. */
  top?: Alternatives[];
  finishReason: "stop" | "length";
}

/** Work counters, for benchmarks and tests. */
export interface BatchStats {
  prefillTokens: number;
  prefillMs: number;
  decodeSteps: number;
  decodeTokens: number;
  decodeMs: number;
}
