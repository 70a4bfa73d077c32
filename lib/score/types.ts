/**
 * What a reward is: a pure function registered by name that looks at one episode and returns a value
 * and a status. The score stage writes `reward_<name>` (the value) and `status_<name>` (the status).
 *
 * A reward returns 0 with a status for anything the model did wrong (no answer, wrong answer, code
 * that crashes or times out). It throws only for faults that are not the model's: a task without the
 * reference the reward needs (UserError: bad data or config) or a sandbox that cannot run (the stage
 * stops). It never turns a crash of its own into a silent 0.
 *
 * @module
 */

import type { JudgeConfig } from "../config/schema.ts";
import type { Task } from "../data/task.ts";
import type { ToolCallRecord as DispatchRecord } from "../rollout/dispatch.ts";
import type { Sandbox } from "./sandbox_api.ts";

/**
 * One tool call of an episode, as the rollout stage recorded it in `tool_calls` (lib/rollout/dispatch.ts);
 * read back from a file, its status is any string (files may come from elsewhere).
 */
export type ToolCallRecord = Omit<DispatchRecord, "status"> & { status: string };

/** A decoded chat message of the `messages` column. */
export interface EpisodeMessage {
  role: string;
  content: string;
  /** An assistant turn's reasoning (its `<think>` block), split off `content` (lib/rollout/assistant_message.ts). */
  reasoning_content?: string;
  name?: string;
  tool_calls?: unknown[];
}

/** The parts of one rollouts row a reward may read. */
export interface Episode {
  /** Row index in the rollouts table. */
  row: number;
  episodeId: string;
  /** The GRPO group (`group_id`): episodes of one task sampled together. */
  groupId: number;
  task: Task;
  /** The whole trajectory: prompt messages, then assistant / tool / user messages. */
  messages: EpisodeMessage[];
  /**
   * Text of the last assistant turn ("" when there is none), its `<think>` block included: the content
   * after its `reasoning_content` in `<think>…</think>` (lib/rollout/assistant_message.ts `turnText`).
   */
  finalText: string;
  toolCalls: ToolCallRecord[];
  /** stop | length | truncated | max_turns | tool_budget | env_done. */
  finishReason: string;
  numTurns: number;
  /** Tokens the policy sampled, every turn together (the rollout's `sampled` flags). */
  sampledTokens: number;
}

/** What a reward says about one episode. */
export interface RewardResult {
  value: number;
  /** Short snake_case reason, e.g. `correct`, `wrong`, `no_answer`, `timeout`. */
  status: string;
  /** Whether the final answer is right, for rewards that measure correctness; else undefined. */
  correct?: boolean;
}

/** What the judge reward needs besides the episodes (lib/score/judge/). */
export interface JudgeContext {
  /** The `score.judge` section. */
  config: JudgeConfig;
  /**
   * Where answers are cached when `score.judge.cache_dir` is null: beside the command's output (the
   * loop: inside its run directory); null when the caller names no output.
   */
  defaultCacheDir: string | null;
  /** Paths the command reads, which the cache directory may not be, hold or lie inside. */
  inputs?: Array<string | null | undefined>;
  /** Where the judge reports what it did (requests made, answers read from the cache). */
  log?: (line: string) => void;
}

/** What the stage hands every reward call. */
export interface RewardContext {
  /** The rollout's sandbox (built only when a reward declares `needsSandbox`). */
  sandbox?: Sandbox;
  /** Wall-clock limit for running code, in milliseconds. */
  codeTimeoutMs: number;
  /** The overlong reward's lengths (`score.overlong`): L_max and the soft zone L_cache before it. */
  overlong?: { maxTokens: number; cacheTokens: number };
  /** The judge's settings (always present when the stage runs the judge reward). */
  judge?: JudgeContext;
}

/** One reward function. `name` is snake_case; its column is `reward_<name>`. */
export interface RewardFn {
  name: string;
  /** One line: what it rewards. */
  doc: string;
  /** Whether it runs model-written code (the stage then opens the sandbox first). */
  needsSandbox?: boolean;
  score(episode: Episode, ctx: RewardContext): RewardResult | Promise<RewardResult>;
  /**
   * Scores every episode of the file at once, in row order; when present the stage calls it instead of
   * `score` (a reward that batches, groups or caches its work: the judge).
   */
  scoreAll?(episodes: Episode[], ctx: RewardContext): Promise<RewardResult[]>;
}
