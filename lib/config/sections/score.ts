/** Schema of the `score` (rewards) and `mask` (advantages, loss masks) sections (see schema.ts). */
import { bool, choice, float, int, listOf, weights } from "../fields.ts";
import { judge } from "./judge.ts";
import { ESTIMATOR_REGISTRY } from "../../advantages/registry.ts";
import { MAX_CONTEXT } from "./run.ts";
export const REWARD_NAMES = [
  "gsm8k",
  "code_exec",
  "exact_match",
  "format",
  "tool_use",
  "judge",
  "agent",
  "overlong",
] as const;
/** The advantage estimators' names: lib/advantages/registry.ts's records (each declares what it needs). */
export const ESTIMATORS: readonly string[] = Object.keys(ESTIMATOR_REGISTRY);
export const REWARD_SCALES = ["group", "batch", "none"] as const;
export const LOSS_MASK_SOURCES = ["sampled", "roles"] as const;
export const GAE_UNITS = ["token", "turn"] as const;

export const score = {
  rewards: weights({
    names: REWARD_NAMES,
    default: { gsm8k: 1.0, tool_use: 0.1 },
    minEntries: 1,
    doc: "reward components and their weights; reward = sum of weight x component",
  }),
  modules: listOf<string>({
    default: [],
    item: { kind: "string" },
    unique: true,
    doc: "custom reward modules by path, each default-exporting a reward (see examples/custom_reward.ts)",
  }),
  module_weights: listOf<number>({
    default: [],
    item: { kind: "float" },
    doc: "weight of each module in score.modules, same order and length",
  }),
  code_timeout_s: float({
    default: 10,
    min: 0,
    minOpen: true,
    max: 3600,
    doc: "wall-clock limit for running a solution's tests (code_exec), in seconds",
  }),
  code_concurrency: int({
    default: 2,
    min: 1,
    max: 64,
    doc: "code_exec solutions run at the same time",
  }),
  turn_reward: {
    tool_success: float({
      default: 1.0,
      doc: "turn reward when all of the turn's tool calls ran without error (turn_rewards)",
    }),
    tool_error: float({
      default: 0.0,
      doc: "turn reward when a tool call failed or could not be parsed (turn_rewards)",
    }),
    no_tool: float({ default: 0.0, doc: "turn reward for a turn without tool calls (turn_rewards)" }),
    success_rate: float({
      default: 0.3,
      doc: "episode turn reward (mt_grpo): weight of (successful calls / valid calls)",
    }),
    per_success: float({
      default: 0.05,
      doc: "episode turn reward (mt_grpo): added per successful call",
    }),
  },
  judge,
  /** The overlong reward (lib/score/overlong.ts): DAPO's soft overlong punishment. */
  overlong: {
    max_tokens: int({
      default: 1024,
      min: 2,
      max: MAX_CONTEXT,
      doc: "overlong reward: L_max, the sampled tokens (all turns) above which it is -1 (DAPO's max " +
        "response length; at most rollout.generation.max_total_tokens)",
    }),
    cache_tokens: int({
      default: 256,
      min: 1,
      max: MAX_CONTEXT,
      doc: "overlong reward: L_cache, the soft zone before max_tokens where it falls linearly from 0 to -1",
    }),
  },
};

export const mask = {
  estimator: choice({
    choices: ESTIMATORS,
    default: "grpo",
    doc:
      "advantage estimator: grpo, dr_grpo (mean only), rloo (leave-one-out), mt_grpo (turn-level), mt_grpo_turns (per turn), gae (PPO: a value head and generalized advantage estimation)",
  }),
  scale_rewards: choice({
    choices: REWARD_SCALES,
    default: "group",
    doc:
      "divide centred rewards by the group std, the batch std, or nothing (grpo, rloo, mt_grpo*; dr_grpo never does)",
  }),
  std_eps: float({ default: 1e-6, min: 0, minOpen: true, max: 1, doc: "added to the std before dividing" }),
  whiten: bool({
    default: false,
    doc:
      "whiten advantages over all masked tokens of the batch after the estimator (verl-tool's mt_grpo does)",
  }),
  turn_coef: float({
    default: 1.0,
    min: 0,
    doc: "mt_grpo, mt_grpo_turns: weight of the turn advantage",
  }),
  loss_mask: choice({
    choices: LOSS_MASK_SOURCES,
    default: "sampled",
    doc: "loss mask from token provenance (sampled) or from the <|im_start|>role state machine (roles)",
  }),
  gamma: float({ default: 1.0, min: 0, max: 1, doc: "gae: discount factor" }),
  lam: float({ default: 0.95, min: 0, max: 1, doc: "gae: lambda" }),
  gae_unit: choice({
    choices: GAE_UNITS,
    default: "turn",
    doc: "gae's step: turn (one value per assistant turn, read at its last token: seed 002) | token (every " +
      "trained token, as verl)",
  }),
  mask_truncated: bool({
    default: false,
    doc: "zero the loss of episodes cut by a token limit, finish_reason length or truncated (DAPO)",
  }),
};
