/**
 * `deno task demo`: the README's main job, on an embedded default (configs/demo.yaml), from a fresh clone
 * with nothing downloaded — GRPO teaching a small Qwen3-architecture model to use the calculator. The
 * command line of `demo()` (lib/demo/run.ts, which says what it does and what it writes); it prints the
 * seed, held-out accuracy, calculator use and successful calls per episode before and after GRPO, and the
 * report's path.
 *
 * @module
 */

import { stringify } from "@std/yaml";
import { loadConfig } from "../lib/config/mod.ts";
import type { Config } from "../lib/config/schema.ts";
import { demo, type DemoOptions } from "../lib/demo/run.ts";
import { summaryLines } from "../lib/demo/result.ts";
import { parseCommandLine } from "../lib/cli/args.ts";
import { reportFailure } from "../lib/cli/cli.ts";
import { stopWithParent } from "../lib/cli/lifetime.ts";
import { fileURLToPath } from "node:url";

/** The demo's configuration file. */
export const DEMO_CONFIG = fileURLToPath(new URL("../configs/demo.yaml", import.meta.url));

const HELP = `deno task demo [--config FILE] [--section.key=value ...]

GRPO teaching a small Qwen3-architecture model to use the calculator, on 2 CPU cores, nothing downloaded:
builds the model (Qwen3 tokenizer pruned to the task), a supervised warm start, then GRPO steps of the loop;
prints its seed, held-out accuracy, calculator use and successful calls before and after GRPO, and the
report's path. Settings: configs/demo.yaml (the model's shape and the warm start: its demo section); the
seed is train.seed (the model's weights and the warm start follow it). Outputs in runs/demo/.

  --config FILE    configuration file (default: configs/demo.yaml)
  --overwrite      replace outputs of ours at model.path / loop.run_dir that an earlier demo did not
                   write (e.g. a deno task loop run); an earlier demo's are replaced without it
  --a.b=VALUE      override one configuration key, e.g. --loop.steps=10
  --print-config   print the resolved configuration and exit
  --debug          show stack traces
  --help           this text

Examples:
  deno task demo
  deno task demo --train.seed=3 --rollout.generation.seed=3
  deno task demo --config configs/demo_multistep.yaml
  deno task demo --loop.steps=10 --eval.num_tasks=100`;

/** The demo's command line: its configuration and options, or null when done (help, print-config). */
async function configFromArgs(
  argv: string[],
): Promise<{ config: Config; hash: string; options: DemoOptions } | null> {
  const { values, overrides } = parseCommandLine(argv, {
    command: "deno task demo",
    string: ["config"],
    boolean: ["help", "debug", "print-config", "overwrite"],
  });
  if (values.help) {
    console.log(HELP);
    return null;
  }
  const configFile = (values.config as string | undefined) ?? DEMO_CONFIG;
  const loaded = await loadConfig({ file: configFile, overrides });
  if (values["print-config"]) {
    console.log(`# config hash ${loaded.hash}\n${stringify(loaded.config)}`);
    return null;
  }
  return { ...loaded, options: { overwrite: values.overwrite === true, configFile } };
}

if (import.meta.main) {
  try {
    const loaded = await configFromArgs(Deno.args);
    if (loaded) {
      stopWithParent("demo", "Run deno task demo again; it starts over."); // SIGTERM, a killed deno task
      const r = await demo(loaded.config, loaded.hash, loaded.options);
      const seeds = { train: loaded.config.train.seed, rollout: loaded.config.rollout.generation.seed };
      console.log(`\n${summaryLines(seeds, r).join("\n")}`);
    }
  } catch (error) {
    Deno.exit(reportFailure("demo", error, Deno.args.includes("--debug")));
  }
}
