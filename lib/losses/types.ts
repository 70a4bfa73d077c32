/**
 * What a policy loss record is (registry.ts holds them by name): the per-token inputs it reads, the
 * scalars it declares (config keys with ranges and defaults), where its gradient stops, its config rules,
 * and its per-token loss as a graph composition. Nothing here imports lib/config/ or lib/train/: the
 * configuration checks and the trainer read these records.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../onnx/builder.ts";
import type { ConfigRule } from "../algorithm_rules.ts";

/** What a computed input sees of an episode: its per-token inputs by graph-input name. */
export interface EpisodeInputs {
  inputs: Readonly<Record<string, ArrayLike<number>>>;
}

/**
 * A scalar a loss reads: `train.loss.<key>` in config.yaml (validated against this range, this default)
 * and a graph input named `key`. Two losses that read one key share its declaration.
 */
export interface LossScalar {
  key: string;
  default: number;
  min?: number;
  max?: number;
  minOpen?: boolean;
  maxOpen?: boolean;
  /** One line for config.yaml and --help. */
  doc: string;
}

/**
 * A per-token input of the train graph. `name` is its graph input and the key of its per-token array in
 * training episodes and micro-batches; `column` is the batch column it is read from, or null for one the
 * trainer computes itself (the reference log-probs, from a pass with the adapter off).
 */
export interface TokenInput {
  name: string;
  column: string | null;
  doc: string;
  /**
   * For an input the trainer computes from the current policy before each optimizer step (GSPO's
   * sequence log-ratio): its per-token values from the episode's current log-probs (NaN where the head
   * did not compute one) and its trained tokens (1 where the loss mask trains, 0 elsewhere). step.ts
   * runs it.
   */
  computed?: {
    each: "optimizer step";
    fromLogprobs(logprobs: Float32Array, episode: EpisodeInputs, weights: Float32Array): Float32Array;
  };
}

/** Per-token inputs of a chunk, each `[C]`, and the run's scalars. */
export interface TokenInputs {
  logprobs: Value; // current policy log-probs (differentiable)
  /** The declared inputs by name, each `[C]`. */
  inputs: Readonly<Record<string, Value>>;
  /** The loss's declared scalars by key (`LossScalar.key`, also the graph input's name), each `[]`. */
  scalars: Readonly<Record<string, Value>>;
}

/** Per-token results, each `[C]`: the loss `l` and its parts for metrics. */
export interface TokenLoss {
  loss: Value;
  pg: Value;
  kl: Value;
  /** 1 where the ratio was clipped (the clipped branch is active and holds the gradient at zero). */
  clipped: Value;
}

/** Builds one objective's per-token loss. */
export type Objective = (g: GraphBuilder, x: TokenInputs) => TokenLoss;

/** A policy loss: its per-token loss and the per-token inputs it reads. */
export interface PolicyLoss {
  name: string;
  /** One line: what it computes. */
  doc: string;
  /** The per-token inputs it always reads, in graph-input order. */
  inputs: readonly TokenInput[];
  /** Its KL term's reference input, read when `train.loss.beta` > 0 (absent: no KL term). */
  reference?: TokenInput;
  /**
   * The scalars it reads, each a `train.loss` key (config checks its range and default; the train graph
   * takes it as a scalar input of the same name; the trainer feeds it from the configuration).
   */
  scalars: readonly LossScalar[];
  /** Whether it reads the rollout's log-probs, so `train.loss.rollout_is` can recompute them. */
  readsOldLogprobs: boolean;
  /** Whether the heads an estimator declares (the value head) train beside it. */
  takesHeads: boolean;
  /** Where its gradient stops (`detach`), in words, or "nowhere". */
  gradientStops: string;
  tokenLoss: Objective;
  /** Rules across config keys this loss needs (run at load by lib/config/cross.ts). */
  rules?: readonly ConfigRule[];
}
