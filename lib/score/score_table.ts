/**
 * The score stage's work on one rollouts file: run every configured reward on every episode and
 * build the scored columns (`reward`, `reward_<name>`, `status_<name>`, `turn_rewards`,
 * `turn_reward`, `correct`). No file I/O except loading custom reward modules.
 *
 * - `reward` = Σ weight · `reward_<name>` over the rewards in `score.rewards` and `score.modules`.
 * - `correct` = every reward that judges correctness (gsm8k, exact_match, code_exec, or a custom one
 *   returning `correct`) said correct; false when none of them is configured.
 * - A reward that returns a non-finite value or no status is a bug in that reward: the stage stops.
 *
 * @module
 */

import type { ColumnInput } from "../arrow/build.ts";
import { FlatList } from "../arrow/columns.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import type { ScoreConfig } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import { readEpisodes, toolCallColumns } from "./episode.ts";
import { loadRewardModule, REWARDS } from "./registry.ts";
import { openSandbox, type Sandbox, type SandboxKind } from "./sandbox_api.ts";
import { episodeTurnReward, turnRewards } from "./turns.ts";
import type { Episode, RewardContext, RewardFn, RewardResult } from "./types.ts";

/** What the score stage needs besides the rollouts. */
export interface ScoreOptions {
  /** The `score` config section. */
  config: ScoreConfig;
  /** The rollout's sandbox settings (`rollout.tools.sandbox`, `rollout.tools.unsafe_no_sandbox`). */
  sandbox: { kind: SandboxKind; unsafeNoSandbox: boolean };
  /** Custom rewards already loaded; when absent they are loaded from `config.modules`. */
  customRewards?: RewardFn[];
  /**
   * The judge's cache directory when `score.judge.cache_dir` is null: beside the caller's output (the
   * loop: in its run directory); null or absent when the caller names none.
   */
  judgeCacheDir?: string | null;
  /** Paths the caller reads, which the judge's cache directory may not be, hold or lie inside. */
  inputs?: Array<string | null | undefined>;
  /** Where rewards report what they did (the judge: requests sent and answers read from its cache). */
  log?: (line: string) => void;
}

/** One weighted reward component. */
export interface Component {
  fn: RewardFn;
  weight: number;
}

/** What the stage prints and returns besides the table. */
export interface ScoreSummary {
  episodes: number;
  reward_mean: number;
  accuracy: number;
  turn_reward_mean: number;
  /** Mean of each component, by name. */
  components: Record<string, number>;
  /** Count of each status, by component name. */
  statuses: Record<string, Record<string, number>>;
}

/** The weighted components of a config: built-ins first, in config order, then custom modules. */
export async function rewardComponents(o: ScoreOptions): Promise<Component[]> {
  const { rewards, modules, module_weights } = o.config;
  if (modules.length !== module_weights.length) {
    throw new UserError("config key score.module_weights", {
      value: module_weights,
      why: `it has ${module_weights.length} weights for ${modules.length} modules in score.modules`,
      fix: "give one weight per module, in the same order",
    });
  }
  const builtins = Object.entries(rewards).map(([name, weight]) => ({
    fn: REWARDS[name as keyof typeof REWARDS],
    weight: weight as number,
  }));
  const custom = o.customRewards ?? await Promise.all(modules.map(loadRewardModule));
  const components = [...builtins, ...custom.map((fn, i) => ({ fn, weight: module_weights[i] ?? 1 }))];
  const names = components.map((c) => c.fn.name);
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup) {
    throw new UserError(`config key score.modules: reward "${dup}"`, {
      why: "two rewards have the same name, so their reward_<name> columns would collide",
      fix: "rename one of them",
    });
  }
  return components;
}

function checked(fn: RewardFn, ep: Episode, r: RewardResult): RewardResult {
  if (!r || typeof r.value !== "number" || !Number.isFinite(r.value) || typeof r.status !== "string") {
    throw new Error(
      `reward ${fn.name} returned ${JSON.stringify(r)} for episode ${ep.episodeId}: ` +
        "a reward must return a finite value and a status string (a bug in the reward)",
    );
  }
  return r;
}

/**
 * Runs one reward over every episode: all at once when it scores them together (`scoreAll`), else one by
 * one (async rewards run concurrently; the sandbox bounds them).
 */
async function runReward(fn: RewardFn, episodes: Episode[], ctx: RewardContext): Promise<RewardResult[]> {
  if (fn.scoreAll) {
    const all = await fn.scoreAll(episodes, ctx);
    if (!Array.isArray(all) || all.length !== episodes.length) {
      throw new Error(
        `reward ${fn.name} returned ${all?.length} results for ${episodes.length} episodes (a bug)`,
      );
    }
    return all.map((r, i) => checked(fn, episodes[i], r));
  }
  const raw = episodes.map((ep) => fn.score(ep, ctx));
  const results = raw.some((r) => r instanceof Promise) ? await Promise.all(raw) : raw as RewardResult[];
  return results.map((r, i) => checked(fn, episodes[i], r));
}

/** `turn_rewards` and `turn_reward` from the tool calls. */
function turnColumns(file: StageFile, config: ScoreConfig): { perTurn: FlatList; episode: Float32Array } {
  const calls = toolCallColumns(file);
  const numTurns = file.vector("num_turns");
  const offsets = new Int32Array(file.rows + 1);
  const turns: number[] = [];
  for (let i = 0; i < file.rows; i++) {
    turns.push(Math.max(0, Number(numTurns.get(i))));
    offsets[i + 1] = offsets[i] + turns[i];
  }
  const values = new Float32Array(offsets[file.rows]);
  const episode = new Float32Array(file.rows);
  for (let i = 0; i < file.rows; i++) {
    const a = calls.offsets[i];
    const b = calls.offsets[i + 1];
    const statuses = calls.status.slice(a, b);
    values.set(turnRewards(turns[i], calls.turn.subarray(a, b), statuses, config.turn_reward), offsets[i]);
    episode[i] = episodeTurnReward(statuses, config.turn_reward);
  }
  return { perTurn: new FlatList(values, offsets), episode };
}

function mean(a: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i];
  return a.length ? sum / a.length : NaN;
}

function countStatuses(results: RewardResult[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) out[r.status] = (out[r.status] ?? 0) + 1;
  return out;
}

/** Scores every episode of `file`; returns the scored file's own columns and a summary. */
export async function scoreColumns(
  file: StageFile,
  o: ScoreOptions,
): Promise<{ columns: Record<string, ColumnInput>; summary: ScoreSummary }> {
  const components = await rewardComponents(o);
  const episodes = readEpisodes(file);
  const n = episodes.length;
  let sandbox: Sandbox | undefined;
  if (n > 0 && components.some((c) => c.fn.needsSandbox)) {
    sandbox = await openSandbox({
      kind: o.sandbox.kind,
      unsafeNoSandbox: o.sandbox.unsafeNoSandbox,
      maxConcurrency: o.config.code_concurrency,
    });
  }
  const ctx: RewardContext = {
    sandbox,
    codeTimeoutMs: o.config.code_timeout_s * 1000,
    overlong: { maxTokens: o.config.overlong.max_tokens, cacheTokens: o.config.overlong.cache_tokens },
    judge: { config: o.config.judge, defaultCacheDir: o.judgeCacheDir ?? null, inputs: o.inputs, log: o.log },
  };
  const columns: Record<string, ColumnInput> = {};
  const summary: ScoreSummary = {
    episodes: n,
    reward_mean: NaN,
    accuracy: NaN,
    turn_reward_mean: NaN,
    components: {},
    statuses: {},
  };
  const reward = new Float32Array(n);
  const judged = new Uint8Array(n);
  const wrong = new Uint8Array(n);
  for (const { fn, weight } of components) {
    const results = await runReward(fn, episodes, ctx);
    const values = Float32Array.from(results, (r) => r.value);
    results.forEach((r, i) => {
      reward[i] += weight * r.value;
      if (r.correct !== undefined) judged[i] = 1;
      if (r.correct === false) wrong[i] = 1;
    });
    columns[`reward_${fn.name}`] = values;
    columns[`status_${fn.name}`] = results.map((r) => r.status);
    summary.components[fn.name] = mean(values);
    summary.statuses[fn.name] = countStatuses(results);
  }
  const correct = Array.from({ length: n }, (_, i) => judged[i] === 1 && wrong[i] === 0);
  const turns = turnColumns(file, o.config);
  Object.assign(columns, { reward, correct, turn_rewards: turns.perTurn, turn_reward: turns.episode });
  summary.reward_mean = mean(reward);
  summary.accuracy = n ? correct.filter(Boolean).length / n : NaN;
  summary.turn_reward_mean = mean(turns.episode);
  return { columns, summary };
}

/** One line: mean reward, accuracy, each component's mean, the turn reward. */
export function scoreSummaryLine(s: ScoreSummary): string {
  const f = (v: number) => Number.isNaN(v) ? "n/a" : v.toFixed(3);
  const parts = Object.entries(s.components).map(([name, v]) => `${name} ${f(v)}`);
  return `score: ${s.episodes} episodes, reward ${f(s.reward_mean)}, accuracy ${f(s.accuracy)}` +
    (parts.length ? `, ${parts.join(", ")}` : "") + `, turn_reward ${f(s.turn_reward_mean)}`;
}
