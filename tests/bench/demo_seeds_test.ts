/**
 * The demo_seeds bench's table (bench/demo_seeds.ts): a row per seed with every column of its header,
 * the episodes by successful calls after GRPO, a failed run as a row of the same width, then the mean and
 * the worst gain of the runs that finished.
 */

import assert from "node:assert/strict";
import { type DemoSeedRow, demoSeedsTable } from "../../bench/demo_seeds.ts";
import type { DemoPoint } from "../../lib/demo/result.ts";

const point = (accuracy: number, callsOkEpisodes: number[]): DemoPoint => {
  const episodes = callsOkEpisodes.reduce((a, b) => a + b, 0);
  const calls = callsOkEpisodes.reduce((a, n, k) => a + n * k, 0);
  return { step: 0, accuracy, toolUse: 1, callsOk: calls / episodes, callsOkEpisodes, episodes };
};

const cells = (line: string) => line.split("|").slice(1, -1).map((c) => c.trim());

Deno.test("demoSeedsTable: one row per seed as wide as its header, the calls histogram, mean and worst gain", () => {
  const rows: DemoSeedRow[] = [
    {
      seed: 3,
      before: point(0.015, [200]),
      after: point(0.54, [0, 1, 191, 8]),
      gain: 52.5,
      copySteps: 1400,
      extraMixSteps: 300,
      minutes: 7.7,
      cpuMinutes: 15.2,
      load: [2.1, 2.0],
    },
    { seed: 4, minutes: 0.2, load: [1, 1], error: "exit 1; see demo.log" },
    {
      seed: 5,
      before: point(0.07, [200]),
      after: point(0.785, [0, 0, 200]),
      gain: 71.5,
      copySteps: 1400,
      extraMixSteps: 0,
      minutes: 7.3,
      cpuMinutes: 14.3,
      load: [2.0, 2.1],
    },
  ];
  const lines = demoSeedsTable({ config: "configs/demo_multistep.yaml", rows });
  const header = cells(lines[2]);
  const table = lines.filter((l) => l.startsWith("| "));
  assert.equal(table.length, 2 + rows.length);
  for (const line of table) assert.equal(cells(line).length, header.length, line);
  const seed3 = cells(table[2]);
  assert.equal(seed3[header.indexOf("episodes by successful calls, after")], "1: 1, 2: 191, 3: 8");
  assert.equal(seed3[header.indexOf("successful calls / episode before → after")], "0.000 → 2.035");
  assert.equal(seed3[header.indexOf("extra mix steps")], "300");
  assert.match(cells(table[3])[1], /^failed: exit 1/);
  assert.equal(lines.at(-1), "Mean gain +62.0 points; worst +52.5 points (2 of 3 runs finished).");
});
