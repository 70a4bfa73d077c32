/**
 * Everything the demo does before GRPO, as one call: the tasks and their held-out split, the demo model
 * (model.ts) at `model.path`, and the supervised warm start (warm_start.ts) into `loop.run_dir/warm/`.
 * The loop then starts from the returned adapter (`model.adapter`).
 *
 * @module
 */

import { join } from "node:path";
import { writeOutputMarker } from "../fs/output.ts";
import type { Config } from "../config/schema.ts";
import type { Task } from "../data/task.ts";
import { openSession } from "../pipeline/mod.ts";
import { toolSpecs } from "../tools/registry.ts";
import { buildDemoModel } from "./model.ts";
import { type DemoSettings, demoSettings } from "./settings.ts";
import { tooManyOperations } from "../tools/calculator.ts";
import { warmStart, warmStartConfig, type WarmStartProgress, type WarmStartResult } from "./warm_start.ts";

/** The maker the demo's output markers name: a later demo replaces these outputs, and only these. */
export const DEMO_MAKER = "demo";

/** What `prepareDemo` made. */
export interface PreparedDemo {
  /** The demo model's directory (`model.path`). */
  modelDir: string;
  /** The warm-start checkpoint: set it as `model.adapter` for the loop. */
  adapterDir: string;
  /** The tasks training never sees (the last `eval.num_tasks`, as the loop holds them out). */
  heldOut: Task[];
  warmStart: WarmStartResult;
  /** Seconds spent building the model. */
  modelSeconds: number;
}

/** Builds the demo model at `config.model.path` (which must not exist) and warm-starts it. */
export async function prepareDemo(
  config: Config,
  configHash: string,
  settings: DemoSettings = demoSettings(config),
  onStep?: WarmStartProgress,
): Promise<PreparedDemo> {
  const started = performance.now();
  // The warm start's session: tasks and tools now (the model's vocabulary is made from them), the
  // tokenizer and the trainer once the model exists.
  const session = openSession(warmStartConfig(config, settings.warmStart), configHash, {
    adapter: null,
    showProgress: false,
  });
  try {
    const tasks = await session.tasks();
    const max = config.rollout.tools.calculator.max_operations;
    const corpus = {
      tasks: [...tasks.train, ...tasks.heldOut],
      systemPrompt: config.data.system_prompt,
      // What the model reads when a call holds too many operations: its tokens belong in the vocabulary.
      // (Not the invalid-call errors of the recovery traces: the vocabulary, and so the model's random
      // weights, stay the same with or without them; those errors encode in smaller pieces.)
      extraTexts: max === null ? [] : [2, 3].map((n) => tooManyOperations(n, max)),
    };
    const model = await buildDemoModel(config.model.path, settings.model, {
      ...corpus,
      tools: toolSpecs([...(await session.tools()).values()]),
    });
    // Marked as the demo's at once, so a demo killed during the warm start is replaced by the next one.
    await writeOutputMarker(model.dir, "model-dir", DEMO_MAKER);
    const modelSeconds = (performance.now() - started) / 1000;
    const result = await warmStart({
      session,
      tasks: tasks.train,
      settings: settings.warmStart,
      dir: join(config.loop.run_dir, "warm"),
    }, onStep);
    return {
      modelDir: model.dir,
      adapterDir: result.out,
      heldOut: tasks.heldOut,
      warmStart: result,
      modelSeconds,
    };
  } finally {
    await session.close();
  }
}
