/**
 * `deno task score`: adds rewards (reward, reward_<name>, status_<name>, turn_rewards, turn_reward,
 * correct) to rollouts.arrow, writing scored.arrow.
 *
 * The stage is a pure function (`score`, exported from mod.ts for notebooks and the loop) plus a thin
 * `main` that reads, calls, writes and prints a one-line summary. Rewards: lib/score/, docs/rewards.md.
 *
 * `--in` may repeat or be a quoted glob: the rollouts files (e.g. rollout shards of one step) are read as
 * one, concatenated in the order given, after checking they come from one policy version and
 * configuration (lib/arrow/merge.ts, docs/serving.md "Shards").
 *
 * @module
 */

import type { Table } from "apache-arrow";
import { readStageFiles } from "../lib/arrow/merge.ts";
import type { StageFile } from "../lib/arrow/stage_file.ts";
import { runStageMain, type StageArgs } from "../lib/cli/cli.ts";
import {
  scoreColumns,
  type ScoreOptions,
  type ScoreSummary,
  scoreSummaryLine,
} from "../lib/score/score_table.ts";
import { asStageFile, outputTable, writeTable } from "../lib/arrow/stage_io.ts";

export type { ScoreOptions, ScoreSummary };

/** Scores a rollouts table: the scored table (input columns + rewards) and a summary. */
export async function score(
  rollouts: Table | StageFile,
  options: ScoreOptions & { configHash?: string },
): Promise<{ table: Table; summary: ScoreSummary }> {
  const input = asStageFile(rollouts, "rollouts");
  const { columns, summary } = await scoreColumns(input, options);
  const table = outputTable(input, "scored", columns, { config_hash: options.configHash ?? "" });
  return { table, summary };
}

async function main(args: StageArgs): Promise<void> {
  const rollouts = await readStageFiles(args.inputs, "rollouts");
  const { tools } = args.config.rollout;
  const { table, summary } = await score(rollouts, {
    config: args.config.score,
    sandbox: { kind: tools.sandbox, unsafeNoSandbox: tools.unsafe_no_sandbox },
    configHash: args.configHash,
  });
  await writeTable(args.output!, "scored", table);
  console.log(scoreSummaryLine(summary));
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
    run: main,
  });
}
