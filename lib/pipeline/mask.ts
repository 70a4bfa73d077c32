/**
 * The mask stage: the per-token loss mask and advantages of a scored table (GRPO, Dr. GRPO, RLOO,
 * MT-GRPO, …: lib/advantages/, docs/advantages.md), as the batch table. No model is loaded.
 *
 * @module
 */

import { outputTable } from "../arrow/stage_io.ts";
import { maskColumns, type MaskSummary } from "../mask/mask_table.ts";
import { stageFileOf, type StageInput, type StageOutput } from "./output.ts";
import type { Session } from "./session.ts";

export type { MaskSummary };

/** Masks and advantages for `scored` with the session's `mask` settings. */
export function mask(
  session: Session,
  scored: StageInput,
  _request: { step: number } = { step: 0 },
): StageOutput<"batch", MaskSummary> {
  const input = stageFileOf(scored, "scored");
  const { columns, summary } = maskColumns(input, { config: session.config.mask });
  const table = outputTable(input, "batch", columns, { config_hash: session.configHash });
  return { kind: "batch", table, summary };
}
