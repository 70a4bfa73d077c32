/**
 * `deno task mask`: adds loss_mask and per-token advantages (GRPO, Dr. GRPO, RLOO, MT-GRPO) to
 * scored.arrow, writing batch.arrow.
 *
 * The command line only: read, the pipeline's `mask` (lib/pipeline/mask.ts; estimators:
 * lib/advantages/, docs/advantages.md; loss masks: lib/mask/), write, a one-line summary. `--in` may
 * repeat or be a quoted glob: the scored files (e.g. rollout shards of one step) are read as one, in the
 * order given, after checking they come from one policy version and configuration (lib/arrow/merge.ts).
 *
 * @module
 */

import { readStageFiles } from "../lib/arrow/merge.ts";
import { pickEstimator } from "../lib/advantages/registry.ts";
import { maskSummaryLine, zeroVarianceWarning } from "../lib/mask/mask_table.ts";
import { mask } from "../lib/pipeline/mask.ts";
import { writeStageOutput } from "../lib/pipeline/output.ts";
import { openSession } from "../lib/pipeline/session.ts";
import { runStageMain, type StageArgs } from "../lib/cli/cli.ts";

async function main(args: StageArgs): Promise<void> {
  const scored = await readStageFiles(args.inputs, "scored");
  const out = mask(openSession(args.config, args.configHash), scored, { step: 0 });
  await writeStageOutput(args.output!, out);
  console.log(maskSummaryLine(out.summary));
  const warning = zeroVarianceWarning(out.summary, scored.vector("reward").toArray() as Float32Array);
  if (warning) console.error(warning);
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
    examples: [
      "deno task mask --in runs/x/scored.arrow --out runs/x/batch.arrow",
      "deno task mask --in runs/x/scored.arrow --out runs/x/batch-rloo.arrow --mask.estimator=rloo",
    ],
    check: (args) => Promise.resolve(void pickEstimator(args.config.mask.estimator)), // gae, before reading
    run: main,
  });
}
