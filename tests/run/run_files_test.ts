/**
 * The loop's `metrics.arrow` (lib/run/run_files.ts): every metric any step reported is a column, so a
 * metric that first appears after a resume (`loop.filter_groups` or `train.rollout_is` switched on, a
 * tool status first seen later) is kept, NaN in the steps before it.
 */

import assert from "node:assert/strict";
import { defaultConfig } from "../../lib/config/mod.ts";
import { readStageFile } from "../../lib/arrow/mod.ts";
import { KINDS } from "../../lib/arrow/kinds.ts";
import { RunLayout } from "../../lib/run/layout.ts";
import { keepRows, writeRunMetrics } from "../../lib/run/run_files.ts";

Deno.test("the loop's metrics keep a metric that first appears at a later step, NaN before it", async () => {
  const layout = new RunLayout(await Deno.makeTempDir({ prefix: "run-metrics-" }));
  // Every declared metric, then the step's own.
  const declared = Object.fromEntries(KINDS.run_metrics.columns.map((c) => [c.name, 0]));
  const rows: Record<string, number>[] = [
    { ...declared, step: 1, reward_mean: 0.5, tool_status_ok: 3 },
    { ...declared, step: 2, reward_mean: 0.7, tool_status_ok: 2, tool_status_timeout: 1, filtered_groups: 4 },
  ];
  await writeRunMetrics(layout, rows, defaultConfig(), "hash");
  const table = (await readStageFile(layout.metrics, "run_metrics")).table;
  const column = (name: string) => Array.from(table.getChild(name)?.toArray() ?? [], Number);
  assert.deepEqual(column("reward_mean"), [0.5, 0.7]);
  assert.deepEqual(column("tool_status_timeout"), [NaN, 1]);
  assert.deepEqual(column("filtered_groups"), [NaN, 4]);
  // Read back as a resumed loop does: the later metrics are there to be written again.
  assert.deepEqual(Object.keys((await keepRows(layout, 2))[1]).sort(), Object.keys(rows[1]).sort());
  await Deno.remove(layout.dir, { recursive: true });
});
