/**
 * `deno task rollout`: samples multi-turn episodes (chat template, tools, environment, group sampling)
 * from the tasks of `data` into rollouts.arrow.
 *
 *   deno task rollout --out runs/x/rollouts.arrow [--step N] [--shard i/n] [--rollout.k=v …]
 *
 * The command line only: flags, the step's tasks, a session, the pipeline's `rollout`, the file
 * (lib/pipeline/rollout.ts).
 *
 * @module
 */

import { rolloutFileBytes } from "../lib/arrow/estimate.ts";
import type { Config } from "../lib/config/schema.ts";
import { loadTasks, type Task } from "../lib/data/mod.ts";
import { UserError } from "../lib/errors.ts";
import { checkFreeSpace } from "../lib/fs/disk_space.ts";
import { openSession, rollout, writeStageOutput } from "../lib/pipeline/mod.ts";
import { parseShard, type Shard, splitHeldOut, stepGroupIds, tasksForStep } from "../lib/rollout/tasks.ts";
import { runStageMain, type StageArgs } from "../lib/cli/cli.ts";
import { algorithmOf } from "../lib/train/algorithm.ts";
import { checkTrainStart } from "../lib/train/train_session.ts";

/** What one rollout command samples: its step, shard and tasks (every check made before any work). */
export interface RolloutPlan {
  step: number;
  shard?: Shard;
  tasks: Task[];
}

/** Reads `--step`, `--shard` and the tasks of the step; refuses bad flags and too few tasks in one line. */
export async function planRollout(config: Config, flags: StageArgs["flags"]): Promise<RolloutPlan> {
  const step = stepFlag(flags.step);
  const shard = flags.shard !== undefined ? parseShard(String(flags.shard)) : undefined;
  const { train } = splitHeldOut(await loadTasks(config.data), config.eval.num_tasks);
  return { step, shard, tasks: tasksForStep(train, step, config.rollout.tasks_per_step, shard) };
}

async function main(args: StageArgs): Promise<void> {
  const { config } = args;
  const { step, shard, tasks } = await planRollout(config, args.flags);
  checkFreeSpace(args.output!, rolloutFileBytes(config, tasks)); // before any episode is sampled
  const session = openSession(config, args.configHash);
  try {
    const out = await rollout(session, tasks, { step, groupIds: stepGroupIds(tasks.length, shard) });
    await writeStageOutput(args.output!, out);
    console.log(`wrote ${args.output} (${out.summary.episodes} episodes)`);
  } finally {
    await session.close();
  }
}

/** `--step N`: a non-negative integer (default 0). */
function stepFlag(value: unknown): number {
  if (value === undefined) return 0;
  const text = String(value).trim();
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UserError("rollout: --step", {
      value,
      why: "it must be a whole number, 0 or more (the loop step: which tasks, and part of every seed)",
      fix: "pass e.g. --step 0, or leave --step out",
    });
  }
  return Number(text);
}

if (import.meta.main) {
  await runStageMain({
    name: "rollout",
    summary:
      "Samples multi-turn episodes (chat template, tools, environment, group sampling) from the tasks of `data` into rollouts.arrow.",
    needsOutput: true,
    output: { kind: "stage-file", fileKind: "rollouts" },
    usesModel: true,
    stringFlags: ["step", "shard"],
    flagHelp: [
      "--step N         loop step: which tasks, and part of every seed (default 0)",
      "--shard i/n      take every n-th task of the step, starting at the i-th (0-based)",
    ],
    configFlags: { adapter: "model.adapter" },
    check: async (args) => {
      await planRollout(args.config, args.flags);
      // With a value head the rollout writes values with the trainer: its adapter must suit it.
      const { model, train } = args.config;
      if (algorithmOf(args.config).valueLoss) await checkTrainStart(model, train, model.adapter);
    },
    examples: [
      "deno task rollout --out runs/x/rollouts.arrow",
      "deno task rollout --out runs/x/rollouts-t07.arrow --rollout.generation.temperature=0.7 --rollout.group_size=4",
    ],
    run: main,
  });
}
