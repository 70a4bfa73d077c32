/**
 * Turn-level rewards from the tool calls' statuses.
 *
 * - `turn_rewards` (one per assistant turn j = 1..num_turns): `tool_success` when the turn made tool
 *   calls and all succeeded, `tool_error` when any of them failed or did not run, `no_tool` when the
 *   turn made none. Used by the `mt_grpo_turns` estimator.
 * - `turn_reward` (one per episode), the trajectory-level turn reward of verl-tool's MT-GRPO recipe
 *   (`compute_turn_reward_from_tool_info`): with V the calls that ran (valid actions) and S those that
 *   succeeded, `success_rate · |S| / |V| + per_success · |S|`, and 0 when V is empty. verl-tool counts
 *   a valid action as successful when its output is non-empty and has no "Error:"/"Traceback"; we use
 *   the tool's own status (`ok`) instead, which the tools decide without guessing from text.
 *
 * @module
 */

import { toolRan, toolSucceeded } from "./tool_status.ts";

/** The weights of `score.turn_reward`. */
export interface TurnRewardWeights {
  tool_success: number;
  tool_error: number;
  no_tool: number;
  success_rate: number;
  per_success: number;
}

/** Per-turn rewards of one episode; `turns[k]`/`statuses[k]` describe its k-th tool call. */
export function turnRewards(
  numTurns: number,
  turns: ArrayLike<number>,
  statuses: readonly string[],
  w: TurnRewardWeights,
): Float32Array {
  const calls = new Int32Array(numTurns + 1);
  const failed = new Uint8Array(numTurns + 1);
  for (let k = 0; k < statuses.length; k++) {
    const j = turns[k];
    if (j < 1 || j > numTurns) continue; // a call outside the recorded turns: ignore (malformed file)
    calls[j]++;
    if (!toolSucceeded(statuses[k])) failed[j] = 1;
  }
  const out = new Float32Array(numTurns);
  for (let j = 1; j <= numTurns; j++) {
    out[j - 1] = calls[j] === 0 ? w.no_tool : failed[j] ? w.tool_error : w.tool_success;
  }
  return out;
}

/** The episode's MT-GRPO turn reward. */
export function episodeTurnReward(statuses: readonly string[], w: TurnRewardWeights): number {
  let valid = 0;
  let success = 0;
  for (const s of statuses) {
    if (!toolRan(s)) continue;
    valid++;
    if (toolSucceeded(s)) success++;
  }
  return valid === 0 ? 0 : w.success_rate * (success / valid) + w.per_success * success;
}
