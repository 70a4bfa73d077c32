/**
 * DAPO's dynamic sampling (arXiv 2503.14476, section 3.2) as verl's DAPO recipe runs it
 * (`algorithm.filter_groups`): a step samples batches of `rollout.tasks_per_step` tasks, drops every group
 * whose episodes all have the same metric (its advantages would all be 0), and samples again until it holds
 * `tasks_per_step` groups or has sampled `max_num_gen_batches` batches; groups beyond `tasks_per_step` are
 * dropped in draw order, as verl truncates to its train batch size. This file holds the pure parts: which
 * tasks each batch draws, which groups are kept, the kept rows, and the step's record of it.
 *
 * Deviations from verl, named:
 * - **The cap trains on what is kept.** verl raises an error when `max_num_gen_batches` is reached short of a
 *   full batch; here the step trains on the groups kept so far and logs it (a step with none refuses, since
 *   there is nothing to train on). The cap is required (≥ 1): verl's 0 (no cap) could sample forever.
 * - **Where extra tasks come from.** verl draws the next batches of its data loader, so later steps see
 *   other prompts. Here a step's first batch is the one `tasksForStep` gives without filtering (the run's
 *   task rotation is unchanged), and its extra batches come from the rest of the training split in an order
 *   shuffled with (rollout.generation.seed, step): a function of the step counter, so a step redone after a
 *   kill draws the same tasks, and no task twice in a step (episode seeds and ids are per task and step).
 *   When the split runs out the step stops as at the cap.
 * - **Equality, not std > 0.** A group is dropped when its values are all equal (the zero-variance rule of
 *   lib/advantages/groups.ts), the same groups as verl's `std == 0` up to float rounding.
 *
 * @module
 */

import type { Table } from "apache-arrow";
import type { StageFile } from "../arrow/stage_file.ts";
import type { FILTER_METRICS } from "../config/sections/run.ts";
import type { Task } from "../data/task.ts";
import { shuffled } from "../data/random.ts";
import { groupsOf } from "../advantages/groups.ts";
import { episodeSeed } from "../rollout/seeds.ts";
import { tasksForStep } from "../rollout/tasks.ts";
import type { ScoreSummary } from "../score/score_table.ts";

export type FilterMetric = typeof FILTER_METRICS[number];

/** What dynamic sampling did in a step: the numbers it logs and records in the run's metrics row. */
export interface FilterRecord {
  /** Groups kept for training. */
  kept: number;
  /** Groups the step wants (rollout.tasks_per_step). */
  wanted: number;
  /** Generation batches sampled. */
  batches: number;
  /** Groups sampled in all batches. */
  drawn: number;
  /** Groups dropped because their metric did not vary. */
  flat: number;
  /** Why the step stopped short of `wanted`: the cap on batches, or the training split ran out. */
  short: "cap" | "tasks" | null;
}

/**
 * The tasks step `step` may draw, in draw order: the step's own tasks (`tasksForStep`), then every other
 * task of the training split in an order shuffled with (`seed`, `step`).
 */
export function drawOrder(train: readonly Task[], step: number, perStep: number, seed: number): Task[] {
  const first = tasksForStep(train, step, perStep);
  const taken = new Set(first);
  const rest = train.filter((task) => !taken.has(task));
  return [...first, ...shuffled(rest, episodeSeed(seed, step, "filter_groups", 0))];
}

/** Generation batch `batch` (1-based) of a draw order: its tasks and their group ids, unique in the step. */
export function genBatch(
  order: readonly Task[],
  batch: number,
  perStep: number,
): { tasks: Task[]; groupIds: number[] } {
  const from = (batch - 1) * perStep;
  const tasks = order.slice(from, from + perStep);
  return { tasks, groupIds: tasks.map((_, j) => from + j) };
}

/** The group ids of `scored` whose `metric` varies (not all equal), in first-seen order, and the group count. */
export function groupsWithSpread(scored: StageFile, metric: FilterMetric): { ids: number[]; groups: number } {
  const groupId = scored.vector("group_id").toArray() as Int32Array;
  const values = Array.from(scored.vector(metric), Number); // correct: booleans as 0 / 1
  const groups = groupsOf(groupId);
  const ids: number[] = [];
  for (let k = 0; k < groups.count; k++) {
    const members = groups.members.subarray(groups.start[k], groups.start[k + 1]);
    if (members.some((i) => values[i] !== values[members[0]])) ids.push(groupId[members[0]]);
  }
  return { ids, groups: groups.count };
}

/** The rows of `file` whose group is in `keep`, in row order (runs of consecutive rows sliced together). */
export function rowsOfGroups(file: StageFile, keep: ReadonlySet<number>): Table {
  const groupId = file.vector("group_id").toArray() as Int32Array;
  const slices: Table[] = [];
  let start = -1;
  for (let i = 0; i <= groupId.length; i++) {
    const inside = i < groupId.length && keep.has(groupId[i]);
    if (inside && start < 0) start = i;
    if (!inside && start >= 0) {
      slices.push(file.table.slice(start, i));
      start = -1;
    }
  }
  if (slices.length === 0) return file.table.slice(0, 0);
  return slices[0].concat(...slices.slice(1));
}

/** The score summary of a scored table's rows (the kept groups: the metrics describe what trains). */
export function scoreSummaryOf(scored: StageFile): ScoreSummary {
  const n = scored.rows;
  const mean = (name: string) =>
    n ? Array.from(scored.vector(name), Number).reduce((a, b) => a + b, 0) / n : NaN;
  const summary: ScoreSummary = {
    episodes: n,
    reward_mean: mean("reward"),
    accuracy: mean("correct"),
    turn_reward_mean: mean("turn_reward"),
    components: {},
    statuses: {},
  };
  for (const name of scored.columnNames) {
    if (name.startsWith("reward_")) summary.components[name.slice("reward_".length)] = mean(name);
    if (!name.startsWith("status_")) continue;
    const counts: Record<string, number> = {};
    for (const status of scored.vector(name)) counts[String(status)] = (counts[String(status)] ?? 0) + 1;
    summary.statuses[name.slice("status_".length)] = counts;
  }
  return summary;
}

/** The step's one line: groups kept of wanted, batches, groups dropped, and why it stopped short if it did. */
export function filterLine(step: number, r: FilterRecord, metric: FilterMetric, cap: number): string {
  const line = `step ${step}: filter_groups kept ${r.kept}/${r.wanted} groups from ${r.batches} generation ` +
    `batches (${r.drawn} groups drawn, ${r.flat} with equal ${metric} dropped)`;
  if (r.short === "cap") {
    return `${line}; cap hit (loop.filter_groups.max_num_gen_batches ${cap}): training on ${r.kept} groups`;
  }
  if (r.short === "tasks") {
    return `${line}; the training split ran out of tasks: training on ${r.kept} groups`;
  }
  return line;
}

/** The record's columns in the run's metrics.arrow row. */
export function filterMetrics(r: FilterRecord): Record<string, number> {
  return {
    filter_groups_kept: r.kept,
    filter_groups_wanted: r.wanted,
    filter_gen_batches: r.batches,
    filter_groups_drawn: r.drawn,
    filter_cap_hit: r.short === "cap" ? 1 : 0,
  };
}
