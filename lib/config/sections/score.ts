/** Schema of the `score` (rewards) and `mask` (advantages) sections (see schema.ts). */
import { bool, choice, float, weights } from "../fields.ts";
export const REWARD_NAMES = ["gsm8k", "code_exec", "exact_match", "format", "tool_use"] as const;
export const ESTIMATORS = ["grpo", "dr_grpo", "rloo", "mt_grpo", "gae"] as const;
/** Estimators that compare samples within a group and so need at least two per task. */
export const GROUP_ESTIMATORS: readonly string[] = ["grpo", "dr_grpo", "rloo", "mt_grpo"];

export const score = {
  rewards: weights({
    names: REWARD_NAMES,
    default: { gsm8k: 1.0, tool_use: 0.1 },
    minEntries: 1,
    doc: "reward components and their weights; reward = sum of weight x component",
  }),
  code_timeout_s: float({
    default: 10,
    min: 0,
    minOpen: true,
    max: 3600,
    doc: "wall-clock limit for running a solution's tests (code_exec), in seconds",
  }),
  turn_reward: {
    tool_success: float({
      default: 1.0,
      doc: "turn reward when all of the turn's tool calls ran without error (mt_grpo)",
    }),
    tool_error: float({
      default: 0.0,
      doc: "turn reward when a tool call failed or could not be parsed (mt_grpo)",
    }),
    no_tool: float({ default: 0.0, doc: "turn reward for a turn without tool calls (mt_grpo)" }),
  },
};

export const mask = {
  estimator: choice({
    choices: ESTIMATORS,
    default: "grpo",
    doc:
      "advantage estimator: grpo, dr_grpo (mean only), rloo (leave-one-out), mt_grpo (turn-level), gae (value head)",
  }),
  std_normalize: bool({
    default: true,
    doc: "divide group-relative advantages by the group std (grpo, rloo, mt_grpo; dr_grpo never does)",
  }),
  std_eps: float({ default: 1e-6, min: 0, minOpen: true, max: 1, doc: "added to the std before dividing" }),
  turn_coef: float({
    default: 1.0,
    min: 0,
    doc: "mt_grpo: weight of the turn advantage on tokens before the first tool result",
  }),
  gamma: float({ default: 1.0, min: 0, max: 1, doc: "gae: discount factor" }),
  lam: float({ default: 0.95, min: 0, max: 1, doc: "gae: lambda" }),
  mask_truncated: bool({
    default: false,
    doc: "zero the loss of episodes cut by max_total_tokens (DAPO's overlong filtering)",
  }),
};
