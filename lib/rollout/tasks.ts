/**
 * Which tasks a step samples: `tasks_per_step` tasks taken in order from the (already shuffled) task
 * list, starting where the previous step stopped and wrapping around, so the task order is a function
 * of the step counter and a resumed run takes the same tasks. With `--shard i/n`, a machine takes every
 * n-th of those tasks starting at the i-th (0-based), and shards together cover the step exactly once.
 *
 * A step never takes a task twice, so `tasks_per_step` above the training split is refused rather than
 * clamped (a step silently smaller than configured would change the batch size, the learning rate's
 * meaning and the run's seeds); so is a shard that would get no task.
 *
 * The held-out split (`splitHeldOut`): the last `eval.num_tasks` tasks are never trained on; 0 means no
 * held-out split, which every command that evaluates refuses (`requireHeldOut`). Training with too few
 * tasks for the split is refused with the fix `--eval.num_tasks=0` rather than silently training on the
 * held-out tasks: a later evaluation would then measure tasks the policy was trained on.
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
  if (shard && shard.index >= chosen.length) {
    throw new UserError("rollout: --shard", {
      value: `${shard.index}/${shard.count}`,
      why: `a step has ${chosen.length} tasks (rollout.tasks_per_step), so this shard would get none`,
      fix: `use at most ${chosen.length} shards, or raise rollout.tasks_per_step`,
    });
  }
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
  if (perStep > tasks.length) {
    throw new UserError("config key rollout.tasks_per_step", {
      value: perStep,
      why: `the training split has only ${tasks.length} tasks, and a step takes each task at most once`,
      fix: `set --rollout.tasks_per_step=${tasks.length} or less, or add tasks ` +
        "(data.max_samples, data.arithmetic.num_tasks, or a smaller eval.num_tasks)",
    });
  }
  const n = perStep;
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
 * training samples the rest, so the two never share a task. `heldOut` 0: no held-out split, every task
 * trains. Otherwise the data set needs more tasks than `heldOut`.
 */
export function splitHeldOut(tasks: readonly Task[], heldOut: number): { train: Task[]; heldOut: Task[] } {
  if (heldOut === 0) return { train: [...tasks], heldOut: [] };
  if (tasks.length <= heldOut) {
    throw new UserError("config key eval.num_tasks", {
      value: heldOut,
      why: `the data set has ${tasks.length} tasks and the last ${heldOut} are held out for evaluation, ` +
        "which leaves none to train on",
      fix: `set eval.num_tasks below ${tasks.length}, add tasks (data.max_samples / ` +
        "data.arithmetic.num_tasks), or pass --eval.num_tasks=0 for no held-out split " +
        "(only where nothing evaluates: rollout, or the loop with loop.eval_every=0)",
    });
  }
  return { train: tasks.slice(0, tasks.length - heldOut), heldOut: tasks.slice(tasks.length - heldOut) };
}

/** Refuses `eval.num_tasks` 0 (no held-out split) for `command`, which evaluates; `fix` says what to do. */
export function requireHeldOut(numTasks: number, command: string, fix: string): void {
  if (numTasks > 0) return;
  throw new UserError("config key eval.num_tasks", {
    value: numTasks,
    why: `${command} evaluates on the held-out tasks, and 0 means there are none`,
    fix,
  });
}
