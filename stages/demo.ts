/**
 * `deno task demo`: the README's main job, on an embedded default (configs/demo.yaml), from a fresh clone
 * with nothing downloaded — GRPO teaching a small Qwen3-architecture model to use the calculator:
 *
 * 1. builds the model with project code: Qwen3's architecture, chat format and special tokens, with the
 *    Qwen3 tokenizer pruned to the tokens the task needs (lib/demo/model.ts);
 * 2. a short supervised warm start (the `sft` loss) on generated traces, mixed so that the starting policy
 *    often answers without the calculator (lib/demo/warm_start.ts);
 * 3. `loop.steps` GRPO steps of the loop (rollout → score → mask → train) on the synthetic arithmetic
 *    tasks, from the warm start's adapter, with held-out evaluations before and after (lib/run/loop.ts);
 * 4. prints held-out accuracy and tool use before and after GRPO (read from the run's own eval files)
 *    and the report's path.
 *
 * Everything lands in `model.path` and `loop.run_dir` (runs/demo: the warm start in its warm/, the GRPO
 * run beside it), both marked as the demo's. A new demo replaces an earlier demo's outputs (and the
 * default model the stages make at runs/demo/model); any other output of ours there (a `deno task loop`
 * run, a make-model model) only with `--overwrite`, and never a run a live loop holds; anything the
 * toolkit did not write is refused. Every check runs before anything is deleted.
 *
 * @module
 */

import { stringify } from "@std/yaml";
import { readStageFile } from "../lib/arrow/read.ts";
import { loadConfig } from "../lib/config/mod.ts";
import type { Config } from "../lib/config/schema.ts";
import { DEMO_SETTINGS } from "../lib/demo/settings.ts";
import { DEMO_MAKER, prepareDemo } from "../lib/demo/prepare.ts";
import { checkOutputPath, type OutputState, writeOutputMarker } from "../lib/fs/output.ts";
import { DEFAULT_MODEL_MAKER } from "../lib/model/default_model.ts";
import { checkLoopTasks, checkRunDir, removeRun } from "../lib/run/run_dir_check.ts";
import { runLoop } from "../lib/run/loop.ts";
import { RunLayout } from "../lib/run/layout.ts";
import { parseCommandLine } from "../lib/cli/args.ts";
import { reportFailure } from "../lib/cli/cli.ts";
import { progress } from "../lib/progress.ts";
import { stopWithParent } from "../lib/cli/lifetime.ts";

/** The demo's configuration file. */
export const DEMO_CONFIG = new URL("../configs/demo.yaml", import.meta.url).pathname;

/** Held-out accuracy and tool use at one evaluation. */
export interface DemoPoint {
  step: number;
  accuracy: number;
  toolUse: number;
  episodes: number;
}

/** What the demo measured: the evaluation after the warm start (step 0) and after GRPO. */
export interface DemoResult {
  before: DemoPoint;
  after: DemoPoint;
  report: string;
  seconds: number;
}

/** How the demo may treat what is already at its outputs. */
export interface DemoOptions {
  /** Replace any output of ours at `model.path` and `loop.run_dir`, not only an earlier demo's. */
  overwrite?: boolean;
  /** The configuration file read (an input: never an output). */
  configFile?: string;
}

/** Runs the demo on `config` (configs/demo.yaml plus overrides). */
export async function demo(
  config: Config,
  hash: string,
  settings = DEMO_SETTINGS,
  options: DemoOptions = {},
): Promise<DemoResult> {
  const started = performance.now();
  await clearEarlierDemo(config, await checkDemoOutputs(config, options));
  const w = settings.warmStart;
  progress.log("demo: building the model (Qwen3's architecture and tokenizer, pruned to the task's tokens)");
  const steps = progress.start("demo: supervised warm start", w.steps);
  const prepared = await prepareDemo(config, hash, settings, (_, __, loss) => {
    steps.tick(1, `loss ${loss.toFixed(3)}`);
  });
  steps.done(
    `model ${prepared.modelDir} in ${prepared.modelSeconds.toFixed(0)} s; ${w.steps} sft steps in ` +
      `${prepared.warmStart.seconds.toFixed(0)} s; adapter ${prepared.adapterDir}`,
  );

  const phase = progress.start(`demo: GRPO, ${config.loop.steps} steps of the loop`);
  const grpo = { ...config, model: { ...config.model, adapter: prepared.adapterDir } };
  const run = await runLoop(grpo, hash, { resume: false });
  phase.done(`${run.dir} at step ${run.step}`);

  const layout = new RunLayout(config.loop.run_dir);
  return {
    before: await evalPoint(layout, 0),
    after: await evalPoint(layout, run.step),
    report: layout.report,
    seconds: (performance.now() - started) / 1000,
  };
}

/** Held-out accuracy and tool use from the run's eval file of `step`. */
async function evalPoint(layout: RunLayout, step: number): Promise<DemoPoint> {
  const file = await readStageFile(layout.eval(step), "eval");
  const mean = (name: string) => {
    const values = file.column(name) as boolean[];
    return values.filter(Boolean).length / Math.max(values.length, 1);
  };
  return { step, accuracy: mean("correct"), toolUse: mean("used_tool"), episodes: file.rows };
}

/**
 * What is at the demo's two outputs, checked before anything is deleted: each may be replaced (an
 * earlier demo's, the default model, or any of ours with `--overwrite`), neither holds the other or an
 * input, no live loop holds the run, and the tasks suit the loop.
 */
async function checkDemoOutputs(config: Config, o: DemoOptions): Promise<OutputState[]> {
  const reads = [o.configFile, config.data.path];
  const model = await checkOutputPath(config.model.path, { kind: "model-dir" }, {
    overwrite: o.overwrite,
    flag: "model.path",
    inputs: [...reads, config.loop.run_dir],
    replaceMadeBy: [DEMO_MAKER, DEFAULT_MODEL_MAKER],
  });
  const run = await checkRunDir(config, {
    resume: false,
    overwrite: o.overwrite === true,
    flag: "loop.run_dir",
    inputs: [...reads, config.model.path],
    replaceMadeBy: [DEMO_MAKER],
  });
  await checkLoopTasks(config);
  return [model, run];
}

/** Removes what `checkDemoOutputs` allowed, then creates the run directory marked as the demo's. */
async function clearEarlierDemo(config: Config, [model, run]: OutputState[]): Promise<void> {
  if (model !== "absent") await Deno.remove(config.model.path, { recursive: true });
  if (run !== "absent") await removeRun(config.loop.run_dir);
  await Deno.mkdir(config.loop.run_dir, { recursive: true });
  await writeOutputMarker(config.loop.run_dir, "run-dir", DEMO_MAKER);
}

function pct(x: number): string {
  return `${(100 * x).toFixed(1)}%`;
}

const HELP = `deno task demo [--config FILE] [--section.key=value ...]

GRPO teaching a small Qwen3-architecture model to use the calculator, on 2 CPU cores, nothing downloaded:
builds the model (Qwen3 tokenizer pruned to the task), a supervised warm start, then GRPO steps of the loop;
prints held-out accuracy and tool use before and after GRPO, and the report's path. Settings:
configs/demo.yaml (model shape and warm start: lib/demo/settings.ts). Outputs in runs/demo/.

  --config FILE    configuration file (default: configs/demo.yaml)
  --overwrite      replace outputs of ours at model.path / loop.run_dir that an earlier demo did not
                   write (e.g. a deno task loop run); an earlier demo's are replaced without it
  --a.b=VALUE      override one configuration key, e.g. --loop.steps=10
  --print-config   print the resolved configuration and exit
  --debug          show stack traces
  --help           this text

Examples:
  deno task demo
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
      const r = await demo(loaded.config, loaded.hash, DEMO_SETTINGS, loaded.options);
      console.log(
        `\nheld-out accuracy (${r.after.episodes} problems, greedy): ${
          pct(r.before.accuracy)
        } after the warm ` +
          `start -> ${pct(r.after.accuracy)} after ${r.after.step} GRPO steps ` +
          `(${(100 * (r.after.accuracy - r.before.accuracy)).toFixed(1)} points)`,
      );
      console.log(`calculator use: ${pct(r.before.toolUse)} -> ${pct(r.after.toolUse)}`);
      console.log(`report: ${r.report} (demo took ${(r.seconds / 60).toFixed(1)} min)`);
    }
  } catch (error) {
    Deno.exit(reportFailure("demo", error, Deno.args.includes("--debug")));
  }
}
