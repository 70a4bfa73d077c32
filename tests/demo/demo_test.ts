/**
 * The demo's wiring (stages/demo.ts) on a shortened schedule: it builds the pruned-vocabulary model,
 * warm-starts it, runs GRPO steps of the loop from that adapter, and reads held-out accuracy and tool use
 * before and after from the run's own eval files; a second demo replaces the first's outputs. (Whether the
 * full demo learns is measured by running it: README and BENCH.md give the numbers.)
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../../lib/config/mod.ts";
import { DEMO_SETTINGS } from "../../lib/demo/settings.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import { demo, DEMO_CONFIG } from "../../stages/demo.ts";

Deno.test("the demo builds, warm-starts, runs GRPO and reports before and after from its eval files", async () => {
  const dir = await Deno.makeTempDir({ prefix: "demo-" });
  const { config, hash } = await loadConfig({
    file: DEMO_CONFIG,
    overrides: [
      ["model.path", join(dir, "model")],
      ["loop.run_dir", join(dir, "run")],
      ["loop.steps", "1"],
      ["loop.eval_every", "1"],
      ["eval.num_tasks", "8"],
      ["data.arithmetic.num_tasks", "40"],
      ["rollout.tasks_per_step", "2"],
      ["rollout.group_size", "2"],
    ],
  });
  const short = {
    ...DEMO_SETTINGS,
    warmStart: { ...DEMO_SETTINGS.warmStart, traces: 8, steps: 2, tracesPerStep: 4 },
  };
  for (let run = 0; run < 2; run++) { // the second replaces the first's model and run
    const r = await demo(config, hash, short);
    assert.equal(r.before.step, 0);
    assert.equal(r.after.step, 1);
    assert.equal(r.before.episodes, 8);
    const after = await readStageFile(join(dir, "run", "eval", "step-0001.arrow"), "eval");
    const correct = after.column("correct") as boolean[];
    assert.equal(r.after.accuracy, correct.filter(Boolean).length / correct.length);
    assert.ok((await Deno.stat(r.report)).isFile);
  }
});
