/**
 * `deno task mask`: Adds loss_mask and per-token advantages (GRPO, Dr. GRPO, RLOO, MT-GRPO) to scored.arrow, writing batch.arrow.
 *
 * The stage is a pure function (`mask`, exported from mod.ts for notebooks) plus a thin `main`.
 * Its body is built by a later issue; until then it exits 2 and writes nothing.
 */
import { NotImplementedError, runStageMain, type StageArgs } from "../lib/stage/cli.ts";

/** Adds loss_mask and per-token advantages (GRPO, Dr. GRPO, RLOO, MT-GRPO) to scored.arrow, writing batch.arrow. */
export function mask(_args: StageArgs): Promise<void> {
  return Promise.reject(new NotImplementedError("mask"));
}

if (import.meta.main) {
  await runStageMain({
    name: "mask",
    summary:
      "Adds loss_mask and per-token advantages (GRPO, Dr. GRPO, RLOO, MT-GRPO) to scored.arrow, writing batch.arrow.",
    needsInput: true,
    needsOutput: true,
    run: mask,
  });
}
