/**
 * The stage-file contract: every kind of Arrow file the stages exchange, declared once.
 *
 * Each kind lists the columns it adds (name, Arrow type, owning stage, doc) and the kind it extends:
 * `scored` = `rollouts` + its columns, `batch` = `scored` + its columns, so every file is
 * self-contained. A kind may also allow dynamic columns by pattern (`reward_<name>`). A stage adds
 * columns; it never rewrites another stage's columns.
 *
 * Per-token list columns are aligned with `tokens`: entry t describes token t.
 *
 * @module
 */

import type { DataType } from "apache-arrow";
import { t } from "./types.ts";

/**
 * Bump when a column or metadata key changes meaning, type or name; readers refuse other versions. New
 * optional columns (`values`, `returns`: patterns below) change nothing a file already means, so they
 * did not bump it: every earlier file still reads.
 */
export const FORMAT_VERSION = 1;

/** The kinds of stage file. */
export const STAGE_KINDS = ["rollouts", "scored", "batch", "metrics", "eval", "run_metrics"] as const;
export type StageKind = typeof STAGE_KINDS[number];

/** The stages (scripts under `stages/`) that own columns. */
export type StageName = "rollout" | "score" | "mask" | "train" | "eval" | "loop";

/**
 * What a numeric column's values (or its lists' items) may be, checked by the reader
 * (lib/arrow/validate.ts): `non_negative` (token ids, turn indices, counts), `zero_or_one` (flags),
 * `finite` (no NaN or ±Infinity), `prompt_length` (from 0 to the row's number of tokens).
 */
export type ValueRule = "non_negative" | "zero_or_one" | "finite" | "prompt_length";

/** One declared column. */
export interface ColumnDecl {
  name: string;
  type: DataType;
  /** The stage that writes this column; later stages carry it through unchanged. */
  stage: StageName;
  doc: string;
  /** The values it may hold, where that is narrower than its type. */
  values?: ValueRule;
  /** A list with one entry per token of `tokens` in every row. */
  perToken?: boolean;
}

/**
 * Dynamic columns allowed by name pattern, e.g. one `reward_<name>` per reward component; also the way
 * to declare an optional column (a pattern matching one name), which files written before it existed do
 * not have. Value rules and per-token alignment are checked as for declared columns.
 */
export interface PatternDecl {
  pattern: RegExp;
  /** How the pattern reads in messages, e.g. `reward_<name>`. */
  shape: string;
  type: DataType;
  stage: StageName;
  doc: string;
  values?: ValueRule;
  perToken?: boolean;
}

/** The declaration of one kind: what it adds on top of the kind it extends. */
export interface KindDecl {
  kind: StageKind;
  /** The stage that writes files of this kind. */
  stage: StageName;
  /** The usual file name in a run's step directory. */
  fileName: string;
  rowPer: string;
  extends?: StageKind;
  columns: ColumnDecl[];
  patterns: PatternDecl[];
  /** Metadata keys the writing stage must supply (beyond those the writer fills itself). */
  requiredMetadata: string[];
  doc: string;
}

/** Episode statuses (docs/RELIABILITY.md); `status` columns hold one of these. */
export const EPISODE_STATUSES = [
  "ok",
  "tool_error",
  "timeout",
  "oom",
  "output_truncated",
  "invalid_tool_call",
  "tool_budget_exceeded",
  "sandbox_error",
  // Recorded by `deno task serve --record` (lib/serve/gateway/): the client rewrote its history.
  "history_mismatch",
] as const;
export type EpisodeStatus = typeof EPISODE_STATUSES[number];

/** The struct of one tool call in `tool_calls`. */
export const TOOL_CALL_TYPE = (): DataType =>
  t.struct({
    turn: t.int16(),
    name: t.utf8(),
    arguments: t.utf8(),
    status: t.utf8(),
    output: t.utf8(),
    ms: t.float32(),
  });

const col = (stage: StageName) =>
(
  name: string,
  type: DataType,
  doc: string,
  rules: Pick<ColumnDecl, "values" | "perToken"> = {},
): ColumnDecl => ({ name, type, stage, doc, ...rules });

/** A per-token list column with the values it may hold. */
const perToken = (values?: ValueRule) => ({ perToken: true, ...(values ? { values } : {}) });

const ro = col("rollout");
const sc = col("score");
const mk = col("mask");
const tr = col("train");
const ev = col("eval");
const lp = col("loop");

const SNAKE = "[a-z0-9]+(?:_[a-z0-9]+)*";

const rewardPattern = (stage: StageName): PatternDecl => ({
  pattern: new RegExp(`^reward_${SNAKE}$`),
  shape: "reward_<name>",
  type: t.float32(),
  stage,
  doc: "one reward component per registered reward function (snake_case name)",
});

const ROLLOUTS: KindDecl = {
  kind: "rollouts",
  stage: "rollout",
  fileName: "rollouts.arrow",
  rowPer: "episode",
  doc: "sampled episodes: token-in-token-out trajectories with provenance and log-probs",
  columns: [
    ro("episode_id", t.utf8(), "unique id of the episode"),
    ro("task_id", t.utf8(), "id of the task the episode answers"),
    ro("group_id", t.int32(), "GRPO group: episodes of one task sampled together"),
    ro("sample_idx", t.int32(), "index of the episode within its group"),
    ro("task", t.utf8(), "JSON of the task (answer, tests…) as the rewards need it"),
    ro("prompt_messages", t.utf8(), "JSON array of the prompt's chat messages"),
    ro("messages", t.utf8(), "JSON array of the decoded trajectory (prompt + generated + tool turns)"),
    ro("tokens", t.list(t.int32()), "every token of the trajectory, prompt included", {
      values: "non_negative",
    }),
    ro("prompt_len", t.int32(), "number of leading tokens that are the rendered prompt", {
      values: "prompt_length",
    }),
    ro(
      "sampled",
      t.list(t.uint8()),
      "per token: 1 = sampled by the policy, 0 = added by the environment",
      perToken("zero_or_one"),
    ),
    ro(
      "logprobs",
      t.list(t.float32()),
      "per token: policy log-prob at sampling temperature, 0 if not sampled",
      perToken("finite"),
    ),
    ro(
      "turn_idx",
      t.list(t.int16()),
      "per token: assistant turn index (prompt tokens are turn 0)",
      perToken("non_negative"),
    ),
    ro(
      "tool_calls",
      t.list(TOOL_CALL_TYPE()),
      "every tool call: turn, name, arguments JSON, status, output, ms",
    ),
    ro("num_turns", t.int16(), "number of assistant turns", { values: "non_negative" }),
    ro("finish_reason", t.utf8(), "why generation stopped: stop | length | tool_budget | error"),
    ro("status", t.utf8(), `episode status: ${EPISODE_STATUSES.join(" | ")}`),
    ro("policy_version", t.utf8(), "identity (hash) of the adapter that sampled the episode"),
  ],
  patterns: [{
    // Optional: written when the algorithm has a value head (mask.estimator gae), so that the mask stage
    // stays model-free; files without it read as before.
    pattern: /^values$/,
    shape: "values",
    type: t.list(t.float32()),
    stage: "rollout",
    doc: "per token: the value head's estimate V of the state before the token (sampled tokens; 0 elsewhere)",
    ...perToken("finite"),
  }],
  requiredMetadata: [
    "config_hash",
    "model",
    "adapter",
    "tokenizer_hash",
    "chat_template_hash",
    "sampling",
    "seed",
  ],
};

const SCORED: KindDecl = {
  kind: "scored",
  stage: "score",
  fileName: "scored.arrow",
  rowPer: "episode",
  extends: "rollouts",
  doc: "rollouts plus rewards",
  columns: [
    sc("reward", t.float32(), "total reward (weighted sum of the reward_<name> components)"),
    sc("turn_rewards", t.list(t.float32()), "per assistant turn reward (MT-GRPO), empty when unused"),
    sc("correct", t.bool(), "whether the final answer is correct"),
  ],
  patterns: [
    rewardPattern("score"),
    {
      pattern: new RegExp(`^status_${SNAKE}$`),
      shape: "status_<name>",
      type: t.utf8(),
      stage: "score",
      doc: "why reward_<name> scored as it did (e.g. correct, wrong, no_answer, timeout)",
    },
    {
      // A pattern rather than a declared column so files written before it existed stay readable.
      pattern: /^turn_reward$/,
      shape: "turn_reward",
      type: t.float32(),
      stage: "score",
      doc: "episode-level turn reward from the tool calls' statuses (mt_grpo's turn reward)",
    },
  ],
  requiredMetadata: ["config_hash", "input_hashes"],
};

const BATCH: KindDecl = {
  kind: "batch",
  stage: "mask",
  fileName: "batch.arrow",
  rowPer: "episode",
  extends: "scored",
  doc: "scored episodes plus loss masks and per-token advantages, ready to train on",
  columns: [
    mk("loss_mask", t.list(t.uint8()), "per token: 1 = counts in the loss", perToken("zero_or_one")),
    mk("advantages", t.list(t.float32()), "per token advantage", perToken("finite")),
  ],
  patterns: [{
    // Optional: written by estimators with a value head (gae), read by the value loss.
    pattern: /^returns$/,
    shape: "returns",
    type: t.list(t.float32()),
    stage: "mask",
    doc: "per token: the value head's target (advantage + value), 0 off the loss mask",
    ...perToken("finite"),
  }],
  requiredMetadata: ["config_hash", "input_hashes"],
};

/**
 * Training metrics. Besides the declared columns, any extra snake_case Float64 column is allowed
 * (e.g. `reward_mean`, `zero_variance_groups`), so the trainer can log new quantities without a
 * format change; the declared ones are always present.
 */
const METRICS: KindDecl = {
  kind: "metrics",
  stage: "train",
  fileName: "metrics.arrow",
  rowPer: "optimizer step",
  doc: "one row per optimizer step",
  columns: [
    tr("step", t.int32(), "global optimizer step"),
    tr("loss", t.float64(), "total loss (pg + beta·kl)"),
    tr("pg_loss", t.float64(), "policy-gradient loss"),
    tr("kl", t.float64(), "k3 KL to the reference (0 when beta = 0)"),
    tr("clip_frac", t.float64(), "fraction of masked tokens whose ratio was clipped"),
    tr("grad_norm", t.float64(), "global gradient norm before clipping"),
    tr("lr", t.float64(), "learning rate used for the step"),
    tr("tokens", t.int32(), "masked (trained) tokens in the step"),
    tr("seconds", t.float64(), "wall time of the step"),
    tr("entropy", t.float64(), "mean policy entropy over masked tokens (NaN when not computed)"),
  ],
  patterns: [{
    pattern: new RegExp(`^${SNAKE}$`),
    shape: "<snake_case name>",
    type: t.float64(),
    stage: "train",
    doc: "any extra metric",
  }],
  requiredMetadata: ["config_hash", "model", "adapter", "seed"],
};

const EVAL: KindDecl = {
  kind: "eval",
  stage: "eval",
  fileName: "eval.arrow",
  rowPer: "episode",
  doc: "evaluation results: one row per evaluated episode (aggregate them in a notebook or the CLI)",
  columns: [
    ev("episode_id", t.utf8(), "unique id of the episode"),
    ev("task_id", t.utf8(), "id of the task"),
    ev("sample_idx", t.int32(), "index of the sample for this task (pass@k)"),
    ev("policy_version", t.utf8(), "identity (hash) of the adapter evaluated"),
    ev("reward", t.float32(), "total reward"),
    ev("correct", t.bool(), "whether the final answer is correct"),
    ev("num_turns", t.int16(), "number of assistant turns"),
    ev("tokens_generated", t.int32(), "tokens sampled by the policy"),
    ev("finish_reason", t.utf8(), "why generation stopped"),
    ev("status", t.utf8(), `episode status: ${EPISODE_STATUSES.join(" | ")}`),
    ev("messages", t.utf8(), "JSON array of the decoded trajectory"),
    ev("num_tool_calls", t.int16(), "number of tool calls in the episode (any status)"),
    ev("used_tool", t.bool(), "whether the episode made at least one successful (status ok) tool call"),
  ],
  patterns: [
    rewardPattern("eval"),
    {
      // A pattern rather than a declared column so eval files written before it existed stay readable.
      pattern: /^tool_calls_ok$/,
      shape: "tool_calls_ok",
      type: t.int16(),
      stage: "eval",
      doc: "number of tool calls that ran without error (status ok)",
    },
  ],
  requiredMetadata: ["config_hash", "model", "adapter", "sampling", "seed"],
};

/** Float64 columns of `run_metrics`, in file order after `step` (one declaration of the loop's metrics). */
const RUN_METRICS_FLOAT_COLUMNS: Array<[string, string]> = [
  ["reward_mean", "mean total reward of the step's episodes"],
  ["reward_std", "standard deviation of the total reward over the step's episodes"],
  ["accuracy", "fraction of the step's episodes whose final answer is correct"],
  ["frac_zero_std_groups", "fraction of GRPO groups whose rewards are all equal (no learning signal)"],
  ["tool_calls_per_episode", "mean number of tool calls per episode"],
  ["tool_failure_rate", "fraction of tool calls whose status is not ok (0 when there were none)"],
  ["turns_mean", "mean number of assistant turns per episode"],
  ["response_tokens_mean", "mean number of policy-sampled tokens per episode"],
  ["loss", "mean train loss over the step's optimizer steps"],
  ["pg_loss", "mean policy-gradient loss"],
  ["clip_frac", "mean fraction of masked tokens whose ratio was clipped"],
  ["kl", "mean k3 KL to the reference (0 when beta = 0)"],
  ["entropy", "mean policy entropy over masked tokens (NaN when not computed)"],
  ["grad_norm", "mean global gradient norm before clipping"],
  ["lr", "learning rate of the step's last optimizer step"],
  ["seconds_rollout", "wall time of the rollout stage"],
  ["seconds_score", "wall time of the score stage"],
  ["seconds_mask", "wall time of the mask stage"],
  ["seconds_train", "wall time of the train stage"],
  ["tokens_per_s_rollout", "tokens sampled per second during rollout"],
  ["tokens_per_s_train", "tokens trained per second"],
];

/**
 * The loop's per-step summary (`runs/<name>/metrics.arrow`): one row per loop step (rollout → score →
 * mask → train), read by the report and notebooks. Tool-call counts by status come as
 * `tool_status_<status>`; any other snake_case Float64 column is allowed, as in `metrics`.
 */
const RUN_METRICS: KindDecl = {
  kind: "run_metrics",
  stage: "loop",
  fileName: "metrics.arrow",
  rowPer: "loop step",
  doc: "one row per loop step: rewards, tool use, train statistics and timings",
  columns: [
    lp("step", t.int32(), "loop step (1-based, as in step-NNNN)"),
    ...RUN_METRICS_FLOAT_COLUMNS.map(([name, doc]) => lp(name, t.float64(), doc)),
  ],
  patterns: [
    {
      pattern: new RegExp(`^tool_status_${SNAKE}$`),
      shape: "tool_status_<status>",
      type: t.float64(),
      stage: "loop",
      doc: "number of the step's tool calls with this status",
    },
    {
      pattern: new RegExp(`^${SNAKE}$`),
      shape: "<snake_case name>",
      type: t.float64(),
      stage: "loop",
      doc: "any extra metric",
    },
  ],
  requiredMetadata: ["config_hash", "model", "seed"],
};

/** Every kind's own declaration. */
export const KINDS: Readonly<Record<StageKind, KindDecl>> = {
  rollouts: ROLLOUTS,
  scored: SCORED,
  batch: BATCH,
  metrics: METRICS,
  eval: EVAL,
  run_metrics: RUN_METRICS,
};

/** A kind with what it inherits resolved: all columns in file order, all patterns. */
export interface ResolvedKind extends KindDecl {
  allColumns: ColumnDecl[];
  allPatterns: PatternDecl[];
}

/** Resolves a kind's inheritance chain (parents' columns first). */
export function resolveKind(kind: StageKind): ResolvedKind {
  const decl = KINDS[kind];
  const parent = decl.extends ? resolveKind(decl.extends) : undefined;
  return {
    ...decl,
    allColumns: [...(parent?.allColumns ?? []), ...decl.columns],
    allPatterns: [...(parent?.allPatterns ?? []), ...decl.patterns],
  };
}

/** Whether `kind` names a stage-file kind. */
export function isStageKind(kind: unknown): kind is StageKind {
  return typeof kind === "string" && (STAGE_KINDS as readonly string[]).includes(kind);
}

/** The declared column or matching pattern for `name` in a resolved kind, if any. */
export function findColumn(kind: ResolvedKind, name: string): ColumnDecl | undefined {
  const exact = kind.allColumns.find((c) => c.name === name);
  if (exact) return exact;
  const p = kind.allPatterns.find((p) => p.pattern.test(name));
  return p && {
    name,
    type: p.type,
    stage: p.stage,
    doc: p.doc,
    ...(p.values ? { values: p.values } : {}),
    ...(p.perToken ? { perToken: true } : {}),
  };
}

/** How to re-run a stage, for error messages. */
export function rerunHint(stage: StageName): string {
  return `re-run stage ${stage} (deno task ${stage})`;
}
