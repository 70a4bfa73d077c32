/**
 * `deno task demo`: the main job on an embedded default, from a fresh clone with nothing downloaded.
 *
 * 1. Makes the tiny random Qwen3 of config.yaml (`model.path`) when it is missing (real tokenizer).
 * 2. Loads the tasks of `data` (synthetic arithmetic by default) and renders a prompt.
 * 3. Samples a group of completions per task with the engine (the policy runs in a Worker).
 * 4. Supervised warm start: demonstrations `Final answer: <answer>` as batch.arrow, then the train
 *    stage with `train.loss.aggregation = sft` (LoRA, AdamW), writing a PEFT adapter and metrics.
 * 5. Reloads the policy with the adapter: the answers' log-likelihood before and after, and greedy
 *    replies to tasks it was not trained on (a 2-layer random model learns the format, not arithmetic).
 * 6. Runs the pipeline stages that exist so far and says which comes next.
 *
 * Everything lands in `loop.run_dir` (runs/demo): model/, demo/batch.arrow, demo/adapter/.
 */

import { join } from "node:path";
import { loadConfig } from "../lib/config/mod.ts";
import type { Config } from "../lib/config/schema.ts";
import { loadTasks, type Task } from "../lib/data/mod.ts";
import { loadTokenizer } from "../lib/model/tokenizer.ts";
import type { ChatTokenizer } from "../lib/model/chat.ts";
import { TINY_PRESET, writeRandomQwen3 } from "../lib/model/random_model.ts";
import { loadPolicy } from "../lib/engine/worker_policy.ts";
import type { Policy } from "../lib/engine/policy.ts";
import { readStageFile } from "../lib/arrow/read.ts";
import { writeDemonstrationBatch } from "../lib/train/demonstrations.ts";
import { reportFailure } from "../lib/stage/cli.ts";
import { parseCommandLine } from "../lib/stage/args.ts";
import { stringify } from "@std/yaml";
import { train, trainOptionsOf } from "./train.ts";

/** The demo's own settings on top of config.yaml (a fast warm start on a tiny model). */
const DEMO = {
  demonstrations: 16,
  heldOut: 2,
  samplesPerTask: 2,
  maxNewTokens: 24,
  overrides: [
    ["train.loss.aggregation", "sft"],
    ["train.optimizer.lr", "0.005"],
    ["train.optimizer.max_grad_norm", "1.0"],
    ["train.num_iterations", "30"],
    ["loop.steps", "1"],
  ] as Array<[string, string]>,
};

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

function promptTokens(config: Config, tokenizer: ChatTokenizer, task: Task): number[] {
  const system = config.data.system_prompt;
  const messages = [
    ...(system ? [{ role: "system" as const, content: system }] : []),
    { role: "user" as const, content: task.prompt },
  ];
  return tokenizer.renderChatTokens(messages, { addGenerationPrompt: true, enableThinking: false });
}

async function sampleGroups(policy: Policy, tokenizer: ChatTokenizer, prompts: number[][], config: Config) {
  const group = prompts.flatMap((p) => Array.from({ length: DEMO.samplesPerTask }, () => p));
  const started = performance.now();
  const out = await policy.generate(group, {
    maxNewTokens: DEMO.maxNewTokens,
    temperature: config.rollout.generation.temperature,
    stopTokens: [tokenizer.eosTokenId],
    seeds: group.map((_, i) => config.rollout.generation.seed * 1000 + i),
  });
  const tokens = out.reduce((n, g) => n + g.tokens.length, 0);
  console.log(
    `sampled ${group.length} completions (${tokens} tokens) in ${
      ((performance.now() - started) / 1000).toFixed(1)
    } s:`,
  );
  out.slice(0, 2).forEach((g, i) => console.log(`  [${i}] ${JSON.stringify(tokenizer.decode(g.tokens))}`));
}

/** Mean log-prob of the demonstration answers' tokens under `policy`. */
async function answerLikelihood(policy: Policy, batchPath: string): Promise<number> {
  const batch = await readStageFile(batchPath, "batch");
  const seqs = Array.from({ length: batch.rows }, (_, i) => [...batch.listAt("tokens", i)]);
  const lps = await policy.logprobs(seqs);
  let sum = 0, count = 0;
  lps.forEach((lp, i) => {
    const mask = batch.listAt("loss_mask", i);
    lp.forEach((v, t) => {
      if (mask[t]) (sum += v), (count += 1);
    });
  });
  return sum / count;
}

async function greedyReplies(policy: Policy, tokenizer: ChatTokenizer, prompts: number[][], label: string) {
  const out = await policy.generate(prompts, {
    maxNewTokens: DEMO.maxNewTokens,
    temperature: 0,
    stopTokens: [tokenizer.eosTokenId],
  });
  out.forEach((g, i) => console.log(`  ${label} [${i}] ${JSON.stringify(tokenizer.decode(g.tokens))}`));
}

async function main(config: Config, hash: string): Promise<void> {
  const modelDir = await ensureModel(config);
  const tokenizer = await loadTokenizer(modelDir);
  const tasks = await loadTasks(config.data);
  const [trainTasks, heldOut] = [
    tasks.slice(0, DEMO.demonstrations),
    tasks.slice(DEMO.demonstrations, DEMO.demonstrations + DEMO.heldOut),
  ];
  const prompts = heldOut.map((t) => promptTokens(config, tokenizer, t));
  console.log(
    `data: ${tasks.length} ${config.data.source} tasks; a prompt (${prompts[0].length} tokens):\n${
      tokenizer.decode(prompts[0])
    }`,
  );

  const dir = join(config.loop.run_dir, "demo");
  const batchPath = join(dir, "batch.arrow");
  await Deno.mkdir(dir, { recursive: true });
  const demos = trainTasks.map((task) => ({ task, response: `Final answer: ${task.answer}` }));
  await writeDemonstrationBatch(batchPath, demos, tokenizer, {
    systemPrompt: config.data.system_prompt,
    enableThinking: false,
    configHash: hash,
    model: modelDir,
  });

  const base = await loadPolicy(modelDir, { threads: config.model.threads });
  try {
    await sampleGroups(base, tokenizer, prompts, config);
    console.log(
      `answers' mean log-prob per token, base model: ${(await answerLikelihood(base, batchPath)).toFixed(3)}`,
    );
    await greedyReplies(base, tokenizer, prompts, "base");
  } finally {
    await base.close();
  }

  console.log(`train: supervised warm start on ${demos.length} demonstrations (${batchPath}) …`);
  // The demo's own directory: its earlier adapter is replaced on every run.
  const options = trainOptionsOf(config, hash, join(dir, "adapter"), { overwrite: true });
  const result = await train(await readStageFile(batchPath, "batch"), options);
  const [first, last] = [result.metrics[0], result.metrics.at(-1)!];
  console.log(
    `train: loss ${first.loss.toFixed(3)} → ${
      last.loss.toFixed(3)
    } over ${result.metrics.length} AdamW steps; wrote ${result.out}`,
  );

  const tuned = await loadPolicy(modelDir, { adapter: result.out, threads: config.model.threads });
  try {
    console.log(
      `answers' mean log-prob per token, with the adapter: ${
        (await answerLikelihood(tuned, batchPath)).toFixed(3)
      }`,
    );
    await greedyReplies(tuned, tokenizer, prompts, "tuned");
  } finally {
    await tuned.close();
  }
  nextStages(config, hash);
}

/** Points at the next stage; the demo's body (running the rollout stage here) is rewritten by a later issue. */
function nextStages(config: Config, _configHash: string): void {
  const out = join(config.loop.run_dir, "demo", "rollouts.arrow");
  console.log(`next: deno task rollout --out ${out} (multi-turn tool use with the same model)`);
}

const HELP = `deno task demo [--config FILE] [--section.key=value ...]

Runs the main job on a tiny random Qwen3 in loop.run_dir (default runs/demo): sampling, a supervised
warm start through the train stage, the answers' likelihood before and after.

  --config FILE    configuration file (default: the repository's config.yaml)
  --a.b=VALUE      override one configuration key (after the demo's own settings), e.g.
                   --data.arithmetic.seed=3 or --train.num_iterations=10
  --print-config   print the resolved configuration and exit
  --debug          show stack traces
  --help           this text

Examples:
  deno task demo
  deno task demo --train.num_iterations=10 --rollout.generation.temperature=0.7`;

/** The demo's command line: its configuration (demo settings, then the user's overrides), or null when done. */
async function configFromArgs(argv: string[]): Promise<{ config: Config; hash: string } | null> {
  const { values, overrides } = parseCommandLine(argv, {
    command: "deno task demo",
    string: ["config"],
    boolean: ["help", "debug", "print-config"],
  });
  if (values.help) {
    console.log(HELP);
    return null;
  }
  const loaded = await loadConfig({
    file: values.config as string | undefined,
    overrides: [...DEMO.overrides, ...overrides],
  });
  if (values["print-config"]) {
    console.log(`# config hash ${loaded.hash}\n${stringify(loaded.config)}`);
    return null;
  }
  return loaded;
}

if (import.meta.main) {
  try {
    const loaded = await configFromArgs(Deno.args);
    if (loaded) await main(loaded.config, loaded.hash);
  } catch (error) {
    Deno.exit(reportFailure("demo", error, Deno.args.includes("--debug")));
  }
}
