/**
 * The mask stage's work on one scored file: the loss mask (loss_mask.ts), then per-token advantages
 * (and, for estimators with a value head, the value head's targets `returns`) from the estimator picked
 * once by `mask.estimator` (lib/advantages/), then optional whitening of the advantages.
 * No file I/O. Advantages are 0 wherever the loss mask is 0.
 *
 * @module
 */

import type { ColumnInput } from "../arrow/build.ts";
import { FlatList } from "../arrow/columns.ts";
import { findColumn, rerunHint, resolveKind } from "../arrow/kinds.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import type { MaskConfig } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import { groupsOf } from "../advantages/groups.ts";
import { pickEstimator } from "../advantages/registry.ts";
import type { EpisodeBatch, Estimator } from "../advantages/types.ts";
import { whitenMasked } from "../advantages/whiten.ts";
import { toolCallColumns } from "../score/episode.ts";
import { toolRan } from "../score/tool_status.ts";
import { maskFromRoles, maskFromSampled, zeroTruncated } from "./loss_mask.ts";
import { QWEN3_ROLE_TOKENS, type RoleTokens } from "./roles.ts";

/** What the mask stage needs besides the scored file. */
export interface MaskOptions {
  /** The `mask` config section. */
  config: MaskConfig;
  /** Token ids for `loss_mask: roles` (default Qwen3's). */
  roleTokens?: RoleTokens;
}

/** What the stage prints and returns besides the table. */
export interface MaskSummary {
  estimator: string;
  episodes: number;
  groups: number;
  /** Masked (trained) tokens, and their fraction of all tokens. */
  trained_tokens: number;
  trained_frac: number;
  truncated_masked: number;
  /** Mean |advantage| over trained tokens. */
  adv_abs_mean: number;
  /** The estimator's metrics, `frac_zero_std_groups` among them. */
  metrics: Record<string, number>;
}

/** Refuses a scored file without a column the estimator declares, naming it and the stage that writes it. */
function requireColumns(file: StageFile, est: Estimator): void {
  for (const name of [...(est.needs.columns ?? []), ...(est.needs.perToken ?? [])]) {
    if (file.has(name)) continue;
    const owner = findColumn(resolveKind("scored"), name)?.stage ?? "score";
    throw new UserError(`stage file ${file.path}: column "${name}"`, {
      why: `mask.estimator ${est.name} needs it and the file has none`,
      fix: `${rerunHint(owner)} with mask.estimator ${est.name} in its config to add it`,
    });
  }
}

function checkAligned(file: StageFile, name: string, offsets: Int32Array, other: Int32Array): void {
  const same = other.length === offsets.length && other.every((o, i) => o === offsets[i]);
  if (same) return;
  throw new UserError(`stage file ${file.path}: column "${name}"`, {
    why: "its lists are not aligned with tokens (one entry per token)",
    fix: "re-run stage rollout (deno task rollout) to rewrite the file",
  });
}

/** First assistant turn with a tool call that ran, per episode (0 = none). */
function firstResultTurns(file: StageFile): Int16Array {
  const calls = toolCallColumns(file);
  const out = new Int16Array(file.rows);
  for (let i = 0; i < file.rows; i++) {
    for (let k = calls.offsets[i]; k < calls.offsets[i + 1]; k++) {
      const j = calls.turn[k];
      if (toolRan(calls.status[k]) && j > 0 && (out[i] === 0 || j < out[i])) out[i] = j;
    }
  }
  return out;
}

function lossMaskOf(
  file: StageFile,
  o: MaskOptions,
  offsets: Int32Array,
): { mask: Uint8Array; truncated: number } {
  const sampled = file.listColumn<Uint8Array>("sampled");
  checkAligned(file, "sampled", offsets, sampled.offsets);
  const mask = o.config.loss_mask === "sampled" ? maskFromSampled(sampled.values, offsets) : maskFromRoles(
    file.listColumn<Int32Array>("tokens").values,
    offsets,
    file.vector("prompt_len").toArray() as Int32Array,
    o.roleTokens ?? QWEN3_ROLE_TOKENS,
  );
  const finish = o.config.mask_truncated ? (file.column("finish_reason") as string[]) : [];
  return { mask, truncated: zeroTruncated(mask, offsets, finish) };
}

function batchOf(file: StageFile, mask: Uint8Array, offsets: Int32Array): EpisodeBatch {
  const turnIdx = file.listColumn<Int16Array>("turn_idx");
  checkAligned(file, "turn_idx", offsets, turnIdx.offsets);
  const turnRewards = file.has("turn_rewards") ? file.listColumn<Float32Array>("turn_rewards") : undefined;
  const turnReward = file.has("turn_reward")
    ? file.vector("turn_reward").toArray() as Float32Array
    : undefined;
  return {
    rows: file.rows,
    groups: groupsOf(file.vector("group_id").toArray() as Int32Array),
    reward: finiteRewards(file, "reward", file.vector("reward").toArray() as Float32Array),
    offsets,
    lossMask: mask,
    turnIdx: turnIdx.values,
    firstResultTurn: firstResultTurns(file),
    turnReward: turnReward && finiteRewards(file, "turn_reward", turnReward),
    turnRewards: turnRewards &&
      { values: finiteRewards(file, "turn_rewards", turnRewards.values), offsets: turnRewards.offsets },
    values: file.has("values") ? alignedList(file, "values", offsets) : undefined,
  };
}

/**
 * Refuses a NaN or infinite reward: one would make its group's mean, and so every advantage of the
 * group (of the batch, with whitening), NaN, and the train step would silently learn nothing.
 */
function finiteRewards(file: StageFile, name: string, values: Float32Array): Float32Array {
  const at = values.findIndex((v) => !Number.isFinite(v));
  if (at < 0) return values;
  throw new UserError(
    `stage file ${file.path}: column "${name}" at ${name === "turn_rewards" ? "entry" : "row"} ${at}`,
    {
      value: values[at],
      why: "a reward must be a finite number; this one would make every advantage of its group NaN",
      fix:
        "fix the reward that wrote it (a custom reward must return a finite value) and run deno task score again",
    },
  );
}

/** A per-token Float32 list column's values, checked to be aligned with `tokens`. */
function alignedList(file: StageFile, name: string, offsets: Int32Array): Float32Array {
  const list = file.listColumn<Float32Array>(name);
  checkAligned(file, name, offsets, list.offsets);
  return list.values;
}

/** Loss masks and advantages for every episode of `file`; the batch file's own columns and a summary. */
export function maskColumns(
  file: StageFile,
  o: MaskOptions,
): { columns: Record<string, ColumnInput>; summary: MaskSummary } {
  const estimator = pickEstimator(o.config.estimator);
  requireColumns(file, estimator);
  const offsets = file.listColumn<Int32Array>("tokens").offsets;
  const { mask, truncated } = lossMaskOf(file, o, offsets);
  const batch = batchOf(file, mask, offsets);
  const { advantages, returns, metrics } = estimator.advantages(batch, o.config);
  if (o.config.whiten) whitenMasked(advantages, mask);
  const summary: MaskSummary = {
    estimator: estimator.name,
    episodes: file.rows,
    groups: batch.groups.count,
    ...trainedCounts(mask, advantages),
    truncated_masked: truncated,
    metrics,
  };
  const columns: Record<string, ColumnInput> = {
    loss_mask: new FlatList(mask, offsets),
    advantages: new FlatList(advantages, offsets),
    ...(returns ? { returns: new FlatList(returns, offsets) } : {}),
  };
  return { columns, summary };
}

/** The summary's figures of the trained tokens: how many, their share of all, their mean |advantage|. */
export function trainedCounts(
  mask: Uint8Array,
  advantages: Float32Array,
): Pick<MaskSummary, "trained_tokens" | "trained_frac" | "adv_abs_mean"> {
  let trained = 0;
  let abs = 0;
  for (let t = 0; t < mask.length; t++) {
    if (mask[t]) {
      trained++;
      abs += Math.abs(advantages[t]);
    }
  }
  return {
    trained_tokens: trained,
    trained_frac: mask.length ? trained / mask.length : NaN,
    adv_abs_mean: trained ? abs / trained : NaN,
  };
}

/**
 * A warning when every group's episodes had equal rewards (`frac_zero_std_groups` 1): every advantage
 * is 0, so the step trains nothing (loss 0, grad_norm 0), which is otherwise silent. Null otherwise.
 */
export function zeroVarianceWarning(s: MaskSummary, rewards: ArrayLike<number>): string | null {
  if (s.metrics.frac_zero_std_groups !== 1 || rewards.length === 0) return null;
  const distinct = [...new Set(Array.from(rewards))].sort((a, b) => a - b);
  const values = distinct.length <= 3 ? distinct.join(", ") : `${distinct[0]} to ${distinct.at(-1)}`;
  return `warning: in all ${s.groups} groups the episodes have equal rewards (rewards ${values}; ` +
    "frac_zero_std_groups 1.000), so every advantage is 0 and this step trains nothing. Likely cause: " +
    "the tasks are all too hard or all too easy for this model (every episode wrong, or every one right), " +
    "or the rewards cannot tell the episodes apart; check the reward_* statuses in scored.arrow, and try " +
    "easier or harder tasks, a larger rollout.group_size or a higher rollout.generation.temperature";
}

/** One line: estimator, episodes, trained tokens, zero-variance groups, mean |advantage|. */
export function maskSummaryLine(s: MaskSummary): string {
  const f = (v: number) => Number.isNaN(v) ? "n/a" : v.toFixed(3);
  const extra = Object.entries(s.metrics).map(([k, v]) => `${k} ${f(v)}`).join(", ");
  return `mask: ${s.estimator}, ${s.episodes} episodes in ${s.groups} groups, ` +
    `${s.trained_tokens} trained tokens (${f(s.trained_frac)}), ${s.truncated_masked} truncated masked, ` +
    `|adv| ${f(s.adv_abs_mean)}, ${extra}`;
}
