/**
 * `deno task loop`: `loop.steps` steps of rollout → score → mask → train in `loop.run_dir`, resumable,
 * with held-out evaluations and a report (lib/run/loop.ts; the run layout: docs/runs.md).
 *
 *   deno task loop [--resume] [--overwrite] [--loop.steps=N] [--loop.run_dir=runs/x] [--section.key=v …]
 *
 * `--resume` continues from the run's `latest` step (refused if the model, tokenizer or LoRA shape
 * changed); `--overwrite` deletes an earlier run of ours in that directory and starts over, never one
 * a live loop holds (a lock left by a dead process is stale and goes with it). A second loop on the same
 * directory is refused ("run locked by pid N"). All of it is checked before the default model is made.
 *
 * @module
 */

import { writeOutputMarker } from "../lib/fs/output.ts";
import { runLoop } from "../lib/run/loop.ts";
import { RunLayout } from "../lib/run/layout.ts";
import { checkJudge } from "../lib/score/judge/judge.ts";
import { checkLoopTasks, checkRunDir, removeRun } from "../lib/run/run_dir_check.ts";
import { inputsOf, runStageMain, type StageArgs } from "../lib/cli/cli.ts";

export { runLoop };

/** The run directory may be started, resumed or replaced as asked; the tasks suit the loop. */
async function check(args: StageArgs) {
  const state = await checkRunDir(args.config, {
    resume: args.flags.resume === true,
    overwrite: args.overwrite === true,
    flag: "loop.run_dir",
    inputs: inputsOf(args, true),
  });
  await checkLoopTasks(args.config);
  await checkJudge(args.config.score, {
    defaultCacheDir: new RunLayout(args.config.loop.run_dir).judgeCache,
    inputs: inputsOf(args, true),
  });
  return state;
}

async function main(args: StageArgs): Promise<void> {
  const { config } = args;
  const dir = config.loop.run_dir;
  const resume = args.flags.resume === true;
  const state = await check(args); // again: cheap, and the lock is read as late as possible
  if (state === "ours" && !resume) await removeRun(dir); // --overwrite: an earlier run of ours
  await Deno.mkdir(dir, { recursive: true });
  await writeOutputMarker(dir, "run-dir");
  const result = await runLoop(config, args.configHash, { resume });
  console.log(`loop: ${result.dir} at step ${result.step}; report ${result.dir}/report.html`);
}

if (import.meta.main) {
  await runStageMain({
    name: "loop",
    summary: "Runs loop.steps steps of rollout -> score -> mask -> train in loop.run_dir, with held-out " +
      "evaluations every loop.eval_every steps and a report at the end.",
    booleanFlags: ["resume"],
    resumeHint: "Run the same command with --resume to continue from the last complete step.",
    flagHelp: ["--resume         continue the run in loop.run_dir from its latest step"],
    usesModel: true,
    takesOverwrite: true,
    check: async (args) => void await check(args),
    examples: [
      "deno task loop --loop.steps=5 --loop.run_dir=runs/try",
      "deno task loop --resume --loop.run_dir=runs/try",
    ],
    run: main,
  });
}
