/**
 * One row of a run's `metrics.arrow` (kind run_metrics) from what a loop step produced: the episodes,
 * the score and mask summaries, the optimizer steps and each stage's wall time.
 *
 * @module
 */

import { TOOL_CALL_STATUSES } from "../tools/types.ts";
import type { Episode } from "../rollout/rollout.ts";
import type { ScoreSummary } from "../score/score_table.ts";
import type { MaskSummary } from "../mask/mask_table.ts";
import type { StepMetrics } from "../train/step.ts";

/** Wall time of each stage of a step, in seconds. */
export interface StageSeconds {
  rollout: number;
  score: number;
  mask: number;
  train: number;
}

/** What a loop step produced, for its metrics row. */
export interface StepOutcome {
  step: number;
  episodes: readonly Episode[];
  rewards: ArrayLike<number>;
  score: ScoreSummary;
  mask: MaskSummary;
  train: readonly StepMetrics[];
  seconds: StageSeconds;
}

/** The run_metrics row of a step (every value a number; `step` an integer). */
export function stepMetricsRow(o: StepOutcome): Record<string, number> {
  const n = Math.max(o.episodes.length, 1);
  const calls = o.episodes.flatMap((e) => e.toolCalls);
  const sampled = o.episodes.reduce((s, e) => s + e.sampled.reduce((a, b) => a + b, 0), 0);
  const trained = o.train.reduce((s, m) => s + m.tokens, 0);
  const row: Record<string, number> = {
    step: o.step,
    reward_mean: o.score.reward_mean,
    reward_std: std(o.rewards),
    accuracy: o.score.accuracy,
    frac_zero_std_groups: o.mask.metrics.frac_zero_std_groups ?? NaN,
    tool_calls_per_episode: calls.length / n,
    tool_failure_rate: calls.length ? calls.filter((c) => c.status !== "ok").length / calls.length : 0,
    turns_mean: o.episodes.reduce((s, e) => s + e.numTurns, 0) / n,
    response_tokens_mean: sampled / n,
    loss: mean(o.train.map((m) => m.loss)),
    pg_loss: mean(o.train.map((m) => m.pg_loss)),
    clip_frac: mean(o.train.map((m) => m.clip_frac)),
    kl: mean(o.train.map((m) => m.kl)),
    entropy: mean(o.train.map((m) => m.entropy)),
    grad_norm: mean(o.train.map((m) => m.grad_norm)),
    lr: o.train.at(-1)?.lr ?? NaN,
    seconds_rollout: o.seconds.rollout,
    seconds_score: o.seconds.score,
    seconds_mask: o.seconds.mask,
    seconds_train: o.seconds.train,
    tokens_per_s_rollout: sampled / Math.max(o.seconds.rollout, 1e-9),
    tokens_per_s_train: trained / Math.max(o.seconds.train, 1e-9),
  };
  for (const status of TOOL_CALL_STATUSES) {
    row[`tool_status_${status}`] = calls.filter((c) => c.status === status).length;
  }
  const mismatch = o.train[0]?.rolloutIs; // train.loss.rollout_is on: the batch's mismatch
  if (mismatch) Object.assign(row, mismatch);
  Object.assign(row, ppoMeans(o.train));
  return row;
}

/** The one-line console summary of a step. */
export function stepLine(row: Record<string, number>, steps: number): string {
  const f = (k: string, d = 3) => Number.isFinite(row[k]) ? row[k].toFixed(d) : "nan";
  return `step ${row.step}/${steps}: reward ${f("reward_mean")} ± ${f("reward_std")} acc ${f("accuracy")} ` +
    `zero-std ${f("frac_zero_std_groups", 2)} tools/ep ${f("tool_calls_per_episode", 2)} ` +
    `fail ${f("tool_failure_rate", 2)} turns ${f("turns_mean", 2)} len ${f("response_tokens_mean", 1)} ` +
    `loss ${f("loss", 4)} clip ${f("clip_frac")} kl ${f("kl", 4)} gnorm ${f("grad_norm", 3)} ` +
    `lr ${row.lr.toExponential(1)} | s: rollout ${f("seconds_rollout", 1)} score ${f("seconds_score", 1)} ` +
    `mask ${f("seconds_mask", 1)} train ${f("seconds_train", 1)} | rollout ${
      f("tokens_per_s_rollout", 0)
    } tok/s`;
}

/** PPO's metrics over the step's optimizer steps (value head runs only; empty otherwise). */
function ppoMeans(train: readonly StepMetrics[]): Record<string, number> {
  const ppo = train.flatMap((m) => (m.ppo ? [m.ppo] : []));
  if (ppo.length === 0) return {};
  return {
    value_loss: mean(ppo.map((p) => p.value_loss)),
    approx_kl: mean(ppo.map((p) => p.approx_kl)),
    explained_var: mean(ppo.map((p) => p.explained_var)),
    value_mean: mean(ppo.map((p) => p.value_mean)),
    ppo_epochs_run: ppo.at(-1)!.epoch,
  };
}

function mean(xs: readonly number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;
}

function std(xs: ArrayLike<number>): number {
  const a = Array.from(xs);
  if (a.length < 2) return 0;
  const m = mean(a);
  return Math.sqrt(a.reduce((s, x) => s + (x - m) ** 2, 0) / (a.length - 1));
}
