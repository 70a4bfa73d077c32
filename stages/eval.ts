/**
 * `deno task eval`: accuracy, pass@k and tool use of a policy (the base model, or `model.adapter`) on the
 * held-out tasks (the last `eval.num_tasks` of the data set, never trained on), through the same rollout
 * code, tools and rewards as training; writes eval.arrow (one row per episode) and a one-line summary.
 *
 *   deno task eval --out runs/x/eval.arrow [--adapter runs/x/adapters/step-0010] [--eval.samples=4]
 *
 * The command line only: the held-out tasks, a session, the pipeline's `evaluate`
 * (lib/pipeline/evaluate.ts), the file.
 *
 * @module
 */

import { episodeFileBytes } from "../lib/arrow/estimate.ts";
import type { Config } from "../lib/config/schema.ts";
import { loadTasks, type Task } from "../lib/data/mod.ts";
import { checkFreeSpace } from "../lib/fs/disk_space.ts";
import { evalSummaryLine, evaluate, openSession, writeStageOutput } from "../lib/pipeline/mod.ts";
import { requireHeldOut, splitHeldOut } from "../lib/rollout/tasks.ts";
import { judgeCacheBeside } from "../lib/score/judge/cache.ts";
import { checkJudge } from "../lib/score/judge/judge.ts";
import { inputsOf, runStageMain, type StageArgs } from "../lib/cli/cli.ts";

/** The held-out tasks; refuses `eval.num_tasks` 0 (no held-out split) and a data set too small for it. */
export async function heldOutTasks(config: Config): Promise<Task[]> {
  requireHeldOut(
    config.eval.num_tasks,
    "deno task eval",
    "set eval.num_tasks to 1 or more (e.g. --eval.num_tasks=64, the default)",
  );
  return splitHeldOut(await loadTasks(config.data), config.eval.num_tasks).heldOut;
}

async function main(args: StageArgs): Promise<void> {
  const { config } = args;
  const heldOut = await heldOutTasks(config);
  checkFreeSpace( // before any episode is sampled
    args.output!,
    episodeFileBytes("eval", {
      tasks: heldOut,
      perTask: config.eval.samples,
      maxTotalTokens: config.rollout.generation.max_total_tokens,
      systemPrompt: config.data.system_prompt,
    }),
  );
  const session = openSession(config, args.configHash, { judgeCacheDir: judgeCacheBeside(args.output!) });
  try {
    const out = await evaluate(session, { step: 0, tasks: heldOut });
    await writeStageOutput(args.output!, out);
    console.log(evalSummaryLine(out.summary));
  } finally {
    await session.close();
  }
}

if (import.meta.main) {
  await runStageMain({
    name: "eval",
    summary: "Evaluates a policy (base model or model.adapter) on the held-out tasks: accuracy, pass@k, " +
      "tool use; writes eval.arrow.",
    needsOutput: true,
    output: { kind: "stage-file", fileKind: "eval" },
    usesModel: true,
    configFlags: { adapter: "model.adapter" },
    check: async (args) => {
      await heldOutTasks(args.config);
      await checkJudge(args.config.score, {
        defaultCacheDir: judgeCacheBeside(args.output!),
        inputs: inputsOf(args, true),
      });
    },
    examples: ["deno task eval --out runs/x/eval.arrow --eval.samples=4 --eval.temperature=0.7"],
    run: main,
  });
}
