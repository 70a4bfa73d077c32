/**
 * Checks of a run directory before a command writes into it or replaces it (`deno task loop`, the
 * demo), all made before any work: the output policy (lib/fs/output.ts), no live loop holding its lock
 * (lib/run/lock.ts: `--overwrite` must never delete a running loop's directory; a lock left by a dead
 * process is stale and may go), a `--resume` that has a run to resume, and the tasks the loop will take.
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { loadTasks } from "../data/mod.ts";
import { UserError } from "../errors.ts";
import { checkOutputPath, type OutputState, realPathOf } from "../fs/output.ts";
import { defaultModelMissing } from "../model/default_model.ts";
import { requireHeldOut, splitHeldOut, tasksForStep } from "../rollout/tasks.ts";
import { RunLayout } from "./layout.ts";
import { liveLockOwner } from "./lock.ts";
import { completedSteps } from "./run_files.ts";
import { checkResumable } from "./snapshot.ts";

export interface RunDirCheck {
  /** Continue the run there (`--resume`). */
  resume: boolean;
  /** Replace an earlier run of ours there (`--overwrite`). */
  overwrite: boolean;
  /** How to name the directory in messages (`loop.run_dir`). */
  flag: string;
  /** Paths the command reads: the run directory may not be, hold or lie inside one. */
  inputs: Array<string | null | undefined>;
  /** Makers whose runs may be replaced without `--overwrite` (the demo replaces an earlier demo's). */
  replaceMadeBy?: string[];
}

/** Checks `config.loop.run_dir` for a loop that starts, resumes or replaces it; returns what is there. */
export async function checkRunDir(config: Config, o: RunDirCheck): Promise<OutputState> {
  const dir = config.loop.run_dir;
  const state = await checkOutputPath(dir, { kind: "run-dir" }, {
    resume: o.resume,
    overwrite: o.overwrite,
    flag: o.flag,
    inputs: o.resume ? await withoutOwnSnapshot(o.inputs, dir) : o.inputs,
    replaceMadeBy: o.replaceMadeBy,
  });
  if (o.resume && state !== "ours") {
    throw new UserError(`loop --resume: ${dir}`, {
      why: "there is no run there to resume",
      fix: "run without --resume to start it",
    });
  }
  if (state === "ours") await refuseRunning(dir, o.resume ? "resume" : "replace");
  if (o.resume) {
    const layout = new RunLayout(dir);
    await completedSteps(layout);
    if (!(await defaultModelMissing(config.model.path))) await checkResumable(layout, config);
  }
  return state;
}

/**
 * A resumed run may take its own snapshot as `--config`: the file is read whole before the run writes
 * anything, and what the run writes there is the snapshot again (lib/run/snapshot.ts).
 */
async function withoutOwnSnapshot(inputs: Array<string | null | undefined>, dir: string) {
  // Compared as the output check compares paths (links resolved), so any spelling of the snapshot counts.
  const snapshot = await realPathOf(new RunLayout(dir).config);
  const others = [];
  for (const input of inputs) if (!input || await realPathOf(input) !== snapshot) others.push(input);
  return others;
}

/** Refuses while a live process holds the run's lock (`what` the command would do to the run). */
export async function refuseRunning(dir: string, what: "resume" | "replace"): Promise<void> {
  const owner = await liveLockOwner(new RunLayout(dir).lock);
  if (owner === null) return;
  throw new UserError(`run locked by pid ${owner}`, {
    value: dir,
    why: what === "replace"
      ? "a loop is running in this run directory, and replacing it would delete the files under it"
      : "another loop is running in this run directory",
    fix: `wait for pid ${owner} to finish (or stop it), or use another loop.run_dir`,
  });
}

/** Deletes an earlier run of ours (`--overwrite`), checking the lock again just before. */
export async function removeRun(dir: string): Promise<void> {
  await refuseRunning(dir, "replace");
  await Deno.remove(dir, { recursive: true });
}

/** What the loop takes from the tasks: a held-out split when it evaluates, and a full first step. */
export async function checkLoopTasks(config: Config): Promise<void> {
  if (config.loop.eval_every > 0) {
    requireHeldOut(
      config.eval.num_tasks,
      "the loop (loop.eval_every > 0)",
      "set eval.num_tasks to 1 or more, or pass --loop.eval_every=0 to train without held-out evaluations",
    );
  }
  const { train } = splitHeldOut(await loadTasks(config.data), config.eval.num_tasks);
  tasksForStep(train, 1, config.rollout.tasks_per_step);
}
