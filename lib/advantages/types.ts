/**
 * What an advantage estimator is: one record picked once from config by name (`mask.estimator`),
 * holding the function that turns a batch of scored episodes into per-token advantages, the inputs it
 * needs (columns, per-token columns, model heads such as a value head, groups of episodes per task), its
 * config rules, and the metrics it reports. The mask stage, the trainer and the config checks loop over
 * `needs` and `rules` instead of naming GRPO's inputs or PPO's keys in each file.
 *
 * @module
 */

import type { ConfigRule } from "../algorithm_rules.ts";
import type { Groups } from "./groups.ts";

/** Heads beside the language model's an estimator can need. */
export type HeadName = "value";

/** The `mask` config keys estimators read. */
export interface AdvantageOptions {
  scale_rewards: "group" | "batch" | "none";
  std_eps: number;
  turn_coef: number;
  gamma: number;
  lam: number;
  /** gae: one step per trained token (verl) or per assistant turn (seed 002). */
  gae_unit: "token" | "turn";
}

/**
 * The batch an estimator sees. Per-token arrays are flat and aligned with `tokens`: episode i's
 * tokens are `[offsets[i], offsets[i + 1])`.
 */
export interface EpisodeBatch {
  rows: number;
  groups: Groups;
  /** `reward` per episode. */
  reward: Float32Array;
  offsets: Int32Array;
  /** The loss mask (1 = trained on); advantages outside it must be 0. */
  lossMask: Uint8Array;
  /** `turn_idx` per token. */
  turnIdx: Int16Array;
  /** First assistant turn with a tool call that ran (lib/score/tool_status.ts), 0 for none. */
  firstResultTurn: Int16Array;
  /** `turn_reward` per episode, when the file has it. */
  turnReward?: Float32Array;
  /** `turn_rewards` (one per assistant turn), when the file has it. */
  turnRewards?: { values: Float32Array; offsets: Int32Array };
  /** `values` per token (the value head's, written by the rollout), when the file has it. */
  values?: Float32Array;
}

/**
 * What an estimator returns: advantages aligned with `tokens`, the value head's targets (`returns`,
 * for estimators with a value head), and metrics for the summary.
 */
export interface EstimatorOutput {
  advantages: Float32Array;
  returns?: Float32Array;
  /** Always includes `frac_zero_std_groups`. */
  metrics: Record<string, number>;
}

/** One advantage estimator. */
export interface Estimator {
  /** Its `mask.estimator` name. */
  name: string;
  /** One line: what it computes. */
  doc: string;
  /**
   * Declared inputs: scored-file columns, per-token columns, and the model heads the trainer must train
   * beside the policy (`value`: lib/train/value_head.ts, which also declares the value loss's inputs).
   */
  needs: {
    columns?: string[];
    perToken?: string[];
    heads?: HeadName[];
    /** It compares the episodes of one task with each other: `rollout.group_size` must be at least 2. */
    groups?: true;
  };
  /** Rules across config keys it needs besides `needs` (run at load by lib/config/cross.ts). */
  rules?: readonly ConfigRule[];
  advantages(batch: EpisodeBatch, options: AdvantageOptions): EstimatorOutput;
}
