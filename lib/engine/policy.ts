/**
 * The `Policy` interface the stages talk to (generate, log-probs, adapter), independent of where the
 * model runs: in a Worker on this machine (`loadPolicy`, the default), on this thread (tests), or
 * later behind an inference server.
 *
 * @module
 */

import type { Qwen3Config } from "../model/hf_config.ts";
import type { Adapter, LoraSpec } from "../model/lora.ts";
import type { BatchStats, GenerateOptions, Generation } from "./generate.ts";
import type { SharedWeights } from "../model/shared_weights.ts";
import type { SessionOptions } from "./session.ts";
import type { ScoredWithAlternatives } from "./engine.ts";

export type { BatchStats, GenerateOptions, Generation, TokenEvent } from "./generate.ts";
export type { Alternatives, ScoredWithAlternatives } from "./engine.ts";
export type { SamplingConstraints } from "./constraints.ts";

/**
 * Options of `loadPolicy`: the engine session's (provider and its options, compute dtype, threads, the
 * decode graph and graph capture: lib/engine/session.ts) and the policy's own.
 */
export interface PolicyOptions
  extends
    Pick<SessionOptions, "ep" | "providerOptions" | "compute" | "threads" | "decodeGraph" | "graphCapture"> {
  /** PEFT adapter directory or tensors to start from; default none (the base model). */
  adapter?: string | Adapter | null;
  /**
   * Rank and targets of the adapters the graph is built for when no adapter is given, so that adapters of
   * this shape can be set later without rebuilding the graph. Default: a graph for no adapter until one is
   * set.
   */
  lora?: LoraSpec | null;
  /**
   * Take the adapter merged into the Linears (`W + scale·B·A` once per adapter, merged_weights.ts: fewer
   * kernels per decode step) rather than unmerged (two Gemms per group of Linears, over the checkpoint's
   * own or the shared Linears). Default: merged on GPU providers, unmerged on the CPU (`mergesAdapter`).
   */
  mergeAdapter?: boolean;
  /**
   * The model's float32 weights loaded once per process (`loadSharedWeights`), to share with a trainer
   * in the same process instead of holding a copy of its own (lib/engine/session.ts). Posted to the
   * policy's Worker as is: the memory is shared, not copied.
   */
  sharedWeights?: SharedWeights | null;
  /** Most padded tokens per scoring call (default 4096): bounds memory of `logprobs`. */
  tokenBudget?: number;
  /**
   * Sequences decoded together by `openSequence` (continuous-batching slots, default 32); a sequence
   * opened while all are taken waits for one to close. KV memory grows with slots × capacity.
   */
  maxSequences?: number;
  /**
   * Decode `openSequence` turns at the full slot width, so that log-probs are bit-identical whatever else
   * is in flight (default true; see scheduler.ts). False decodes only up to the highest live slot.
   */
  exactBatching?: boolean;
}

/** Options of `openSequence`. */
export interface SequenceOptions {
  /** Sampling seed: token t is drawn from (seed, t), whatever else is in the batch. */
  seed: number;
  /** Most tokens the sequence may hold (prompt, turns, appended tokens). */
  capacity: number;
  /**
   * Cancels the sequence's work when it fires: a wait for a slot or a turn in progress rejects with an
   * AbortError (lib/engine/abort.ts) within one decode step, and later turns are refused; the sequence
   * still needs `close` (to free its slot). Policies that cannot stop early may ignore it.
   */
  signal?: AbortSignal;
}

/**
 * One conversation (an episode) generated turn by turn. Its turns join whatever else the policy is
 * decoding (continuous batching); its cached prefix stays between turns. Close it to free its slot.
 */
export interface PolicySequence {
  /** Samples one turn, continuing after everything appended so far. */
  generate(options: GenerateOptions): Promise<Generation>;
  /** Appends environment tokens (a tool result, a user turn); they are processed at the next turn. */
  append(tokens: readonly number[]): Promise<void>;
  /** All tokens of the sequence so far. */
  tokens(): Promise<number[]>;
  close(): Promise<void>;
}

/** Options of `logprobs`. */
export interface LogprobOptions {
  /** Default 1. */
  temperature?: number;
}

/** Options of a whole-batch `generate` or `startBatch`. */
export interface BatchOptions {
  /** Per-sequence sampling seeds (default: the sequence's index). */
  seeds?: readonly number[];
  /** Most tokens a sequence may hold (prompt, turns, appended tokens); default prompt + maxNewTokens. */
  capacity?: number;
}

/** A batch kept open across turns: its KV cache lives in the engine until `close`. */
export interface GenerationSession {
  readonly size: number;
  /** Samples a turn for sequences `which` (default all). */
  generate(options: GenerateOptions, which?: readonly number[]): Promise<Generation[]>;
  /** Appends environment tokens to sequence `i`; they are processed at its next turn. */
  append(i: number, tokens: readonly number[]): Promise<void>;
  /** All tokens of sequence `i`. */
  tokens(i: number): Promise<number[]>;
  stats(): Promise<BatchStats>;
  close(): Promise<void>;
}

/** A Qwen3 policy: base weights plus an optional LoRA adapter. */
export interface Policy {
  readonly config: Qwen3Config;
  /** "base", or `lora:<sha256 prefix of the adapter tensors>`. */
  adapterId(): Promise<string>;
  /** Entry 0 NaN; entry t = log p(seq[t] | seq[<t]) under softmax(logits / temperature). */
  logprobs(seqs: readonly (readonly number[])[], options?: LogprobOptions): Promise<Float32Array[]>;
  /**
   * `logprobs` plus, at each position t > 0, the `k` most likely tokens in place of seq[t] (a served
   * prompt's log-probs with alternatives). Optional: a policy without it cannot report them.
   */
  scoreWithAlternatives?(
    seqs: readonly (readonly number[])[],
    options: LogprobOptions & { k: number },
  ): Promise<ScoredWithAlternatives[]>;
  /** One turn for every prompt; each sequence stops on its own. */
  generate(
    prompts: readonly (readonly number[])[],
    options: GenerateOptions & BatchOptions,
  ): Promise<Generation[]>;
  /** Opens a batch for multi-turn generation (tool results appended between turns). */
  startBatch(
    prompts: readonly (readonly number[])[],
    options: BatchOptions & { capacity: number },
  ): Promise<GenerationSession>;
  /**
   * Opens one sequence for multi-turn generation: episodes call this and then ask for their turns
   * independently; the policy batches whatever turns are pending (waits while all slots are taken).
   */
  openSequence(prompt: readonly number[], options: SequenceOptions): Promise<PolicySequence>;
  /** Work counters of the sequences opened with `openSequence` since the policy loaded. */
  sequenceStats(): Promise<BatchStats>;
  /** Switches the adapter (directory, tensors, or null for the base model). No batch or sequence may be open. */
  setAdapter(adapter: string | Adapter | null): Promise<void>;
  close(): Promise<void>;
}
