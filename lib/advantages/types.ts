/**
 * What an advantage estimator is: one record picked once from config by name (`mask.estimator`),
 * holding the function that turns a batch of scored episodes into per-token advantages, the inputs it
 * needs (columns, per-token columns, model heads such as a value head), and the metrics it reports.
 * The mask stage and the trainer loop over `needs` instead of naming GRPO's inputs in each file.
 *
 * @module
 */

import type { Estimator as EstimatorName } from "../config/schema.ts";
import type { Groups } from "./groups.ts";

/** The `mask` config keys estimators read. */
export interface AdvantageOptions {
  scale_rewards: "group" | "batch" | "none";
  std_eps: number;
  turn_coef: number;
  gamma: number;
  lam: number;
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
}

/** What an estimator returns: advantages aligned with `tokens`, and metrics for the summary. */
export interface EstimatorOutput {
  advantages: Float32Array;
  /** Always includes `frac_zero_std_groups`. */
  metrics: Record<string, number>;
}

/** One advantage estimator. */
export interface Estimator {
  name: EstimatorName;
  /** One line: what it computes. */
  doc: string;
  /** Declared inputs: scored-file columns, per-token columns, model heads (e.g. `value`). */
  needs: { columns?: string[]; perToken?: string[]; heads?: string[] };
  advantages(batch: EpisodeBatch, options: AdvantageOptions): EstimatorOutput;
}
