/**
 * The demo as one library call (`deno task demo` is its command line): GRPO teaching a small
 * Qwen3-architecture model to use the calculator, from nothing downloaded:
 *
 * 1. builds the model with project code: Qwen3's architecture, chat format and special tokens, with the
 *    Qwen3 tokenizer pruned to the tokens the task needs (model.ts);
 * 2. a supervised warm start (the `sft` loss) on generated traces: calculator traces until a greedy probe
 *    shows the copying works, then traces mixed so that the starting policy often answers without the
 *    calculator (warm_start.ts);
 * 3. `loop.steps` GRPO steps of the loop (rollout → score → mask → train) on the synthetic arithmetic
 *    tasks, from the warm start's adapter, with held-out evaluations before and after (lib/run/loop.ts);
 * 4. returns held-out accuracy, calculator use and successful calls per episode before and after GRPO
 *    (read from the run's own eval files), also written to `loop.run_dir/demo.json` (result.ts).
 *
 * Everything lands in `model.path` and `loop.run_dir` (the warm start in its warm/, the GRPO run beside
 * it), both marked as the demo's. A new demo replaces an earlier demo's outputs (and the default model
 * the stages make at runs/demo/model); any other output of ours there (a `deno task loop` run, a
 * make-model model) only with `overwrite`, and never a run a live loop holds; anything the toolkit did
 * not write is refused. Every check runs before anything is deleted.
 *
 * @module
 */

import process from "node:process";
import type { Config } from "../config/schema.ts";
import { checkOutputPath, type OutputState, writeOutputMarker } from "../fs/output.ts";
import { DEFAULT_MODEL_MAKER } from "../model/default_model.ts";
import { progress, type ProgressTask } from "../progress.ts";
import { runLoop } from "../run/loop.ts";
import { RunLayout } from "../run/layout.ts";
import { checkLoopTasks, checkRunDir, removeRun } from "../run/run_dir_check.ts";
import { DEMO_MAKER, prepareDemo } from "./prepare.ts";
import {
  demoPoint,
  type DemoSummary,
  type WarmStartRecord,
  writeDemoSummary,
  writeWarmStartRecord,
} from "./result.ts";
import { type DemoSettings, demoSettings, type WarmStartSettings } from "./settings.ts";
import type { WarmStartEvent, WarmStartPhase } from "./warm_start.ts";

/** How the demo may treat what is already at its outputs. */
export interface DemoOptions {
  /** Replace any output of ours at `model.path` and `loop.run_dir`, not only an earlier demo's. */
  overwrite?: boolean;
  /** The configuration file read (an input: never an output). */
  configFile?: string;
}

/** Runs the demo on `config` (configs/demo.yaml plus overrides); see the module doc. */
export async function demo(
  config: Config,
  hash: string,
  options: DemoOptions = {},
  settings: DemoSettings = demoSettings(config),
): Promise<DemoSummary> {
  const started = performance.now();
  const cpuStart = process.cpuUsage();
  await clearEarlierDemo(config, await checkDemoOutputs(config, options));
  const w = settings.warmStart;
  progress.log(`demo: ${seedLine(config, settings)}`);
  progress.log("demo: building the model (Qwen3's architecture and tokenizer, pruned to the task's tokens)");
  const bar = warmStartProgress(w);
  const prepared = await prepareDemo(config, hash, settings, bar.onEvent);
  const ws = prepared.warmStart;
  bar.done(
    `model ${prepared.modelDir} in ${prepared.modelSeconds.toFixed(0)} s; ${ws.copySteps} + ` +
      `${w.mixSteps + ws.extraMixSteps} sft steps in ${
        ws.seconds.toFixed(0)
      } s; adapter ${prepared.adapterDir}`,
  );
  const record: WarmStartRecord = {
    seeds: {
      train: config.train.seed,
      rollout: config.rollout.generation.seed,
      model: settings.model.seed,
      warmStart: w.seed,
    },
    copySteps: ws.copySteps,
    mixSteps: w.mixSteps,
    extraMixSteps: ws.extraMixSteps,
    probes: ws.probes,
    startProbes: ws.startProbes,
    modelSeconds: prepared.modelSeconds,
    warmStartSeconds: ws.seconds,
  };
  await writeWarmStartRecord(config.loop.run_dir, record);

  const phase = progress.start(`demo: GRPO, ${config.loop.steps} steps of the loop`);
  const grpo = { ...config, model: { ...config.model, adapter: prepared.adapterDir } };
  const run = await runLoop(grpo, hash, { resume: false });
  phase.done(`${run.dir} at step ${run.step}`);

  const cpu = process.cpuUsage(cpuStart);
  const summary: DemoSummary = {
    before: await demoPoint(config.loop.run_dir, 0),
    after: await demoPoint(config.loop.run_dir, run.step),
    warmStart: record,
    report: new RunLayout(config.loop.run_dir).report,
    seconds: (performance.now() - started) / 1000,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
  await writeDemoSummary(config.loop.run_dir, summary);
  return summary;
}

/** Which seeds the run uses: the demo's seed is train.seed (rollout.generation.seed beside it). */
export function seedLine(config: Config, settings: DemoSettings): string {
  return `seed ${config.train.seed} (train.seed; rollout.generation.seed ${config.rollout.generation.seed}, ` +
    `model weights ${settings.model.seed}, warm-start traces ${settings.warmStart.seed})`;
}

/** Progress of the warm start: a bar per phase, a line per probe. */
function warmStartProgress(w: WarmStartSettings) {
  let bar: ProgressTask = progress.start(
    "demo: warm start, calculator traces (until the copy probe passes)",
    w.copyMaxSteps,
  );
  let phase: WarmStartPhase = "copy";
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const onEvent = (e: WarmStartEvent) => {
    if (e.kind === "probe") {
      const p = e.probe;
      progress.log(
        `demo: copy probe after ${p.step} steps (each turn's first token given): accuracy ` +
          `${pct(p.accuracy)}, ${p.callsOk.toFixed(2)} successful calls per episode`,
      );
      return;
    }
    if (e.kind === "start_probe") {
      const p = e.probe;
      progress.log(
        `demo: start probe after ${p.step} steps (greedy, as GRPO starts): accuracy ${pct(p.accuracy)}, ` +
          `calculator use ${pct(p.toolUse)} (at most ${pct(w.maxStartToolUse)} leaves GRPO room)`,
      );
      return;
    }
    if (e.phase !== phase) {
      bar.done(`${e.step - 1} steps`);
      bar = e.phase === "mix" ? progress.start("demo: warm start, all traces", w.mixSteps) : progress.start(
        "demo: warm start, more of all traces (the policy calls too often)",
        w.extraMixSteps,
      );
      phase = e.phase;
    }
    bar.tick(1, `loss ${e.loss.toFixed(3)}`);
  };
  return { onEvent, done: (summary: string) => bar.done(summary) };
}

/**
 * What is at the demo's two outputs, checked before anything is deleted: each may be replaced (an
 * earlier demo's, the default model, or any of ours with `overwrite`), neither holds the other or an
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
