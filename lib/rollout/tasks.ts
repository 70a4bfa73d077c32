/**
 * Which tasks a step samples: `tasks_per_step` tasks taken in order from the (already shuffled) task
 * list, starting where the previous step stopped and wrapping around, so the task order is a function
 * of the step counter and a resumed run takes the same tasks. With `--shard i/n`, a machine takes every
 * n-th of those tasks starting at the i-th (0-based), and shards together cover the step exactly once.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import { UserError } from "../errors.ts";

/** A shard `index` of `count` (0 ≤ index < count). */
export interface Shard {
  index: number;
  count: number;
}

/** The tasks of loop step `step` (a shard's share of them with `shard`). */
export function tasksForStep(tasks: readonly Task[], step: number, perStep: number, shard?: Shard): Task[] {
  const chosen = stepTasks(tasks, step, perStep);
  return shard ? chosen.filter((_, k) => k % shard.count === shard.index) : chosen;
}

/** The GRPO group id of each task `tasksForStep` gives: its position in the whole step, shards or not. */
export function stepGroupIds(count: number, shard?: Shard): number[] {
  return Array.from({ length: count }, (_, j) => (shard ? j * shard.count + shard.index : j));
}

function stepTasks(tasks: readonly Task[], step: number, perStep: number): Task[] {
  if (tasks.length === 0) {
    throw new UserError("rollout: the data set", {
      why: "it has no tasks",
      fix: "check data.source and data.path (and data.max_samples)",
    });
  }
  const n = Math.min(perStep, tasks.length); // a task appears at most once per step
  return Array.from({ length: n }, (_, k) => tasks[(step * n + k) % tasks.length]);
}

/** Parses `--shard i/n`. */
export function parseShard(text: string): Shard {
  const m = /^(\d+)\/(\d+)$/.exec(text.trim());
  const [index, count] = m ? [Number(m[1]), Number(m[2])] : [NaN, NaN];
  if (!(count >= 1 && index >= 0 && index < count)) {
    throw new UserError("rollout: --shard", {
      value: text,
      why: "it must be i/n with 0 <= i < n",
      fix: "pass e.g. --shard 0/2 on one machine and --shard 1/2 on the other",
    });
  }
  return { index, count };
}

/**
 * The held-out split: the last `heldOut` tasks of the (shuffled) data set are for evaluation only and
 * training samples the rest, so the two never share a task. Needs at least one training task.
 */
export function splitHeldOut(tasks: readonly Task[], heldOut: number): { train: Task[]; heldOut: Task[] } {
  if (tasks.length <= heldOut) {
    throw new UserError("eval.num_tasks", {
      value: heldOut,
      why: `the data set has ${tasks.length} tasks, and training needs at least one that is not held out`,
      fix: "lower eval.num_tasks, or raise data.max_samples / data.arithmetic.num_tasks",
    });
  }
  return { train: tasks.slice(0, tasks.length - heldOut), heldOut: tasks.slice(tasks.length - heldOut) };
}
