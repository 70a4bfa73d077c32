/**
 * `deno task demo`: the main job on an embedded default, from a fresh clone with nothing downloaded.
 *
 * It makes the tiny random Qwen3 of config.yaml (`model.path`) when it is missing, loads the tasks of
 * `data`, renders the first prompts with the real Qwen3 chat template, then runs every pipeline step
 * that is built so far and says which step comes next. Each step prints what it did.
 */

import { join } from "node:path";
import { loadConfig } from "../lib/config/mod.ts";
import type { Config } from "../lib/config/schema.ts";
import { loadTasks } from "../lib/data/mod.ts";
import { loadTokenizer } from "../lib/model/tokenizer.ts";
import { TINY_PRESET, writeRandomQwen3 } from "../lib/model/random_model.ts";
import { NotImplementedError, reportFailure } from "../lib/stage/cli.ts";
import { rollout } from "./rollout.ts";

/** Makes the tiny model at `model.path` unless a model directory is already there. */
async function ensureModel(config: Config): Promise<string> {
  const dir = config.model.path;
  try {
    await Deno.stat(join(dir, "config.json"));
    console.log(`model: ${dir} (existing)`);
  } catch {
    await writeRandomQwen3(dir, TINY_PRESET);
    console.log(`model: made a tiny random Qwen3 in ${dir} (2 layers, hidden 64, real Qwen3 tokenizer)`);
  }
  return dir;
}

/** Loads the tasks and shows the first prompt as the chat template renders it. */
async function showPrompts(config: Config, modelDir: string): Promise<void> {
  const tasks = await loadTasks(config.data);
  console.log(
    `data: ${tasks.length} ${config.data.source} tasks; the first: ${JSON.stringify(tasks[0].prompt)}`,
  );
  const tokenizer = await loadTokenizer(modelDir);
  const messages = [
    ...(config.data.system_prompt ? [{ role: "system" as const, content: config.data.system_prompt }] : []),
    { role: "user" as const, content: tasks[0].prompt },
  ];
  const ids = tokenizer.renderChatTokens(messages, {
    addGenerationPrompt: true,
    enableThinking: config.rollout.generation.enable_thinking,
  });
  console.log(`prompt: ${ids.length} tokens:\n${tokenizer.decode(ids)}`);
}

/** Runs the built pipeline steps in order; stops at the first one that is not built yet. */
async function runPipeline(config: Config, configHash: string): Promise<void> {
  const dir = join(config.loop.run_dir, "demo-step");
  const steps = [{
    name: "rollout",
    run: () => rollout({ config, configHash, flags: {}, output: join(dir, "rollouts.arrow") }),
  }];
  for (const step of steps) {
    try {
      await step.run();
      console.log(`${step.name}: done`);
    } catch (error) {
      if (!(error instanceof NotImplementedError)) throw error;
      console.log(`${step.name}: not built yet (a later issue); the demo stops here`);
      return;
    }
  }
}

async function main(): Promise<void> {
  const { config, hash } = await loadConfig();
  const modelDir = await ensureModel(config);
  await showPrompts(config, modelDir);
  await runPipeline(config, hash);
}

if (import.meta.main) {
  try {
    await main();
  } catch (error) {
    Deno.exit(reportFailure("demo", error, Deno.args.includes("--debug")));
  }
}
