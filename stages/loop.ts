/**
 * `deno task loop`: `loop.steps` steps of rollout → score → mask → train in `loop.run_dir`, resumable,
 * with held-out evaluations and a report (lib/run/loop.ts; the run layout: docs/runs.md).
 *
 *   deno task loop [--resume] [--overwrite] [--loop.steps=N] [--loop.run_dir=runs/x] [--section.key=v …]
 *
 * `--resume` continues from the run's `latest` step (refused if the model, tokenizer or LoRA shape
 * changed); `--overwrite` deletes an earlier run of ours in that directory and starts over. A second
 * loop on the same directory is refused ("run locked by pid N").
 *
 * @module
 */

import { checkOutputPath, writeOutputMarker } from "../lib/fs/output.ts";
import { UserError } from "../lib/errors.ts";
import { runLoop } from "../lib/run/loop.ts";
import { runStageMain, type StageArgs } from "../lib/stage/cli.ts";

export { runLoop };

async function main(args: StageArgs): Promise<void> {
  const { config } = args;
  const dir = config.loop.run_dir;
  const resume = args.flags.resume === true;
  const state = await checkOutputPath(dir, { kind: "run-dir" }, {
    resume,
    overwrite: args.overwrite,
    flag: "loop.run_dir",
    inputs: [config.model.path, config.model.adapter],
  });
  if (state === "ours" && !resume) {
    await Deno.remove(dir, { recursive: true }); // --overwrite: an earlier run of ours, started over
  }
  if (resume && state !== "ours") {
    throw new UserError(`loop --resume: ${dir}`, {
      why: "there is no run there to resume",
      fix: "run without --resume to start it",
    });
  }
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
    examples: [
      "deno task loop --loop.steps=5 --loop.run_dir=runs/try",
      "deno task loop --resume --loop.run_dir=runs/try",
    ],
    run: main,
  });
}
