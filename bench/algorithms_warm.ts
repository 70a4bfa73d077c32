/**
 * One warm start for `deno task bench --only algorithms` (algorithms_bench.ts), in its own process: the
 * demo's model and supervised warm start (lib/demo/prepare.ts) for one task configuration and one seed,
 * which every estimator's run of that seed then continues from.
 *
 *   deno run -A bench/algorithms_warm.ts --config configs/demo.yaml --seed 1 --model DIR --dir DIR
 *
 * The seed sets the model's random initialisation and the warm start's (which traces answer directly,
 * with which wrong numbers, in which order). Prints one JSON line: the model and adapter directories and
 * the seconds taken.
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { loadConfig } from "../lib/config/mod.ts";
import { demoSettings } from "../lib/demo/settings.ts";
import { prepareDemo } from "../lib/demo/prepare.ts";

const { values } = parseArgs(Deno.args, { string: ["config", "seed", "model", "dir"] });
const seed = Number(values.seed ?? 0);
const { config, hash } = await loadConfig({
  file: values.config as string,
  overrides: [
    ["model.path", values.model as string],
    ["loop.run_dir", values.dir as string],
    ["train.seed", String(seed)],
  ],
});
const demo = demoSettings(config);
const settings = {
  model: { ...demo.model, seed },
  warmStart: { ...demo.warmStart, seed },
};
const prepared = await prepareDemo(config, hash, settings);
console.log(JSON.stringify({
  model: prepared.modelDir,
  adapter: prepared.adapterDir,
  seconds: prepared.modelSeconds + prepared.warmStart.seconds,
}));
