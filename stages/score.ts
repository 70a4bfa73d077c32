/**
 * `deno task score`: adds rewards (reward, reward_<name>, status_<name>, turn_rewards, turn_reward,
 * correct) to rollouts.arrow, writing scored.arrow.
 *
 * The command line only: read, the pipeline's `score` (lib/pipeline/score.ts; rewards: lib/score/,
 * docs/rewards.md), write, a one-line summary. `--in` may repeat or be a quoted glob: the rollouts
 * files (e.g. rollout shards of one step) are read as one, in the order given, after checking they come
 * from one policy version and configuration (lib/arrow/merge.ts, docs/serving.md "Shards").
 *
 * With the judge reward, its answers are cached in `score.judge.cache_dir`, by default `judge-cache/`
 * beside `--out` (docs/rewards.md "Judge").
 *
 * @module
 */

import { readStageFiles } from "../lib/arrow/merge.ts";
import { writeStageOutput } from "../lib/pipeline/output.ts";
import { score } from "../lib/pipeline/score.ts";
import { openSession } from "../lib/pipeline/session.ts";
import { scoreSummaryLine } from "../lib/score/score_table.ts";
import { judgeCacheBeside } from "../lib/score/judge/cache.ts";
import { checkJudge } from "../lib/score/judge/judge.ts";
import { inputsOf, runStageMain, type StageArgs } from "../lib/cli/cli.ts";

/** The judge reward (when configured): its endpoint keys, API key and cache directory, before any work. */
async function check(args: StageArgs): Promise<void> {
  await checkJudge(args.config.score, {
    defaultCacheDir: judgeCacheBeside(args.output!),
    inputs: inputsOf(args, false),
  });
}

async function main(args: StageArgs): Promise<void> {
  const rollouts = await readStageFiles(args.inputs, "rollouts");
  const session = openSession(args.config, args.configHash, {
    judgeCacheDir: judgeCacheBeside(args.output!),
  });
  const out = await score(session, rollouts, { step: 0 });
  await writeStageOutput(args.output!, out);
  console.log(scoreSummaryLine(out.summary));
}

if (import.meta.main) {
  await runStageMain({
    name: "score",
    summary: "Adds rewards (reward, reward_<name>, status_<name>, turn_rewards, turn_reward, correct) " +
      "to rollouts.arrow, writing scored.arrow.",
    needsInput: true,
    manyInputs: true,
    needsOutput: true,
    output: { kind: "stage-file", fileKind: "scored" },
    examples: ["deno task score --in runs/x/rollouts.arrow --out runs/x/scored.arrow"],
    check,
    run: main,
  });
}
