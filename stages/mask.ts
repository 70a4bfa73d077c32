/**
 * `deno task mask`: adds loss_mask and per-token advantages (GRPO, Dr. GRPO, RLOO, MT-GRPO) to
 * scored.arrow, writing batch.arrow.
 *
 * The stage is a pure function (`mask`, exported from mod.ts for notebooks and the loop) plus a thin
 * `main` that reads, calls, writes and prints a one-line summary. Estimators: lib/advantages/,
 * docs/advantages.md; loss masks: lib/mask/.
 *
 * `--in` may repeat or be a quoted glob: the scored files (e.g. rollout shards of one step) are read as
 * one, concatenated in the order given, after checking they come from one policy version and
 * configuration (lib/arrow/merge.ts, docs/serving.md "Shards").
 *
 * @module
 */

import type { Table } from "apache-arrow";
import { readStageFiles } from "../lib/arrow/merge.ts";
import type { StageFile } from "../lib/arrow/stage_file.ts";
import { runStageMain, type StageArgs } from "../lib/cli/cli.ts";
import { maskColumns, type MaskOptions, type MaskSummary, maskSummaryLine } from "../lib/mask/mask_table.ts";
import { pickEstimator } from "../lib/advantages/registry.ts";
import { asStageFile, outputTable, writeTable } from "../lib/arrow/stage_io.ts";

export type { MaskOptions, MaskSummary };

/** Masks and advantages for a scored table: the batch table (input columns + its own) and a summary. */
export function mask(
  scored: Table | StageFile,
  options: MaskOptions & { configHash?: string },
): { table: Table; summary: MaskSummary } {
  const input = asStageFile(scored, "scored");
  const { columns, summary } = maskColumns(input, options);
  const table = outputTable(input, "batch", columns, { config_hash: options.configHash ?? "" });
  return { table, summary };
}

async function main(args: StageArgs): Promise<void> {
  pickEstimator(args.config.mask.estimator); // refuses gae before any reading
  const scored = await readStageFiles(args.inputs, "scored");
  const { table, summary } = mask(scored, { config: args.config.mask, configHash: args.configHash });
  await writeTable(args.output!, "batch", table);
  console.log(maskSummaryLine(summary));
}

if (import.meta.main) {
  await runStageMain({
    name: "mask",
    summary: "Adds loss_mask and per-token advantages (GRPO, Dr. GRPO, RLOO, MT-GRPO) to scored.arrow, " +
      "writing batch.arrow.",
    needsInput: true,
    manyInputs: true,
    needsOutput: true,
    output: { kind: "stage-file", fileKind: "batch" },
    run: main,
  });
}
