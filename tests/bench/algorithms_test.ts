/**
 * bench/algorithms_bench.ts's algorithms: every entry's overrides pass the config loader on each task
 * configuration the bench runs (a misspelt key or a value out of its range is found here, not an hour into
 * a bench), and each entry changes what it names.
 */

import assert from "node:assert/strict";
import { ALGORITHMS } from "../../bench/algorithms_bench.ts";
import { loadConfig } from "../../lib/config/mod.ts";

for (const task of ["configs/demo.yaml", "configs/demo_multistep.yaml"]) {
  Deno.test(`every algorithm of the algorithms bench loads on ${task}`, async () => {
    for (const [name, overrides] of Object.entries(ALGORITHMS)) {
      const { config } = await loadConfig({ file: task, overrides: [...overrides] });
      const objective = config.train.loss.objective;
      assert.ok(
        name === objective || name === config.mask.estimator ||
          (name === "ppo" && config.mask.estimator === "gae") ||
          (name === "dapo" && config.loop.filter_groups.enable),
        `${name}: objective ${objective}, estimator ${config.mask.estimator}`,
      );
    }
  });
}
