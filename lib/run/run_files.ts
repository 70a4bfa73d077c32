/**
 * The run's own files besides the step files: the `latest` pointer and `metrics.arrow` (one row per
 * step, kind run_metrics, rewritten whole after each step: it is small).
 *
 * @module
 */

import { readStageFile } from "../arrow/read.ts";
import { writeStageFile } from "../arrow/write.ts";
import type { Config } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import { readTextIfExists } from "../fs/read.ts";
import { parseStepName, type RunLayout } from "./layout.ts";

/** The last complete step `latest` names (0 when the run has none). */
export async function completedSteps(layout: RunLayout): Promise<number> {
  const text = await readTextIfExists(layout.latest);
  if (text === null) return 0;
  const step = parseStepName(text);
  if (step === null) {
    throw new UserError(`run ${layout.dir}: ${layout.latest}`, {
      value: text.trim(),
      why: "it does not name a step (step-NNNN)",
      fix: "restore it to the last complete step-NNNN directory, or start a new run",
    });
  }
  return step;
}

/** The metrics rows of steps 1..`done` already in the run (a step redone after a kill drops its row). */
export async function keepRows(layout: RunLayout, done: number): Promise<Record<string, number>[]> {
  if (done === 0 || (await readTextIfExists(`${layout.metrics}.manifest.json`)) === null) return [];
  const file = await readStageFile(layout.metrics, "run_metrics");
  const rows = file.table.toArray().map((r) =>
    Object.fromEntries(Object.entries(r.toJSON())) as Record<string, number>
  );
  return rows.filter((r) => Number(r.step) <= done);
}

/**
 * Writes every row so far as `metrics.arrow`: a column for every metric any row has (a metric that first
 * appears after a resume, or a tool status first seen at a later step, is NaN in the rows before it).
 */
export async function writeRunMetrics(
  layout: RunLayout,
  rows: readonly Record<string, number>[],
  config: Config,
  configHash: string,
): Promise<void> {
  const names = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const value = (r: Record<string, number>, k: string) => (k in r ? r[k] : NaN);
  const columns = Object.fromEntries(
    names.map((k) => [
      k,
      k === "step" ? Int32Array.from(rows, (r) => r[k]) : Float64Array.from(rows, (r) => value(r, k)),
    ]),
  );
  await writeStageFile(layout.metrics, "run_metrics", columns, {
    config_hash: configHash,
    model: config.model.path,
    seed: config.rollout.generation.seed,
  });
}
