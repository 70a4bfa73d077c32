/**
 * `deno task rollout`: samples multi-turn episodes (chat template, tools, environment, group sampling)
 * from the tasks of `data` into rollouts.arrow.
 *
 *   deno task rollout --out runs/x/rollouts.arrow [--step N] [--shard i/n] [--rollout.k=v …]
 *
 * The stage is a pure function over a loaded policy (`rollout`, exported from mod.ts; the loop calls it
 * with its policy kept loaded) plus a thin `main` that loads the policy, the tools and the tasks.
 *
 * @module
 */

import type { ColumnInput } from "../lib/arrow/build.ts";
import { rolloutFileBytes } from "../lib/arrow/estimate.ts";
import { checkFreeSpace } from "../lib/fs/disk_space.ts";
import type { MetadataInput } from "../lib/arrow/metadata.ts";
import { writeStageFile } from "../lib/arrow/write.ts";
import type { Config } from "../lib/config/schema.ts";
import { loadTasks, type Task } from "../lib/data/mod.ts";
import type { Policy } from "../lib/engine/policy.ts";
import { openPolicy } from "../lib/engine/open_policy.ts";
import { policyOptionsOf } from "../lib/engine/policy_options.ts";
import type { ChatTokenizer } from "../lib/model/chat.ts";
import { loadTokenizer } from "../lib/model/tokenizer.ts";
import { rolloutColumns } from "../lib/rollout/columns.ts";
import { environmentFactory } from "../lib/rollout/environments.ts";
import { Limiter } from "../lib/rollout/limiter.ts";
import { type Episode, runRollout } from "../lib/rollout/rollout.ts";
import { RolloutProgress } from "../lib/rollout/progress.ts";
import { parseShard, type Shard, splitHeldOut, stepGroupIds, tasksForStep } from "../lib/rollout/tasks.ts";
import { loadTools, toolSpecs } from "../lib/tools/registry.ts";
import type { Tool } from "../lib/tools/types.ts";
import { progress, runStageMain, type StageArgs } from "../lib/cli/cli.ts";
import { UserError } from "../lib/errors.ts";

/** What `rollout` needs besides the policy: its own config section and the prompt's system message. */
export interface RolloutStageOptions {
  rollout: Config["rollout"];
  systemPrompt: string | null;
  /** Loop step: part of every seed and episode id (0 for a single rollout). */
  step: number;
  tools: ReadonlyMap<string, Tool>;
  /** Group ids of the tasks (default their index; a shard passes its tasks' places in the step). */
  groupIds?: readonly number[];
  /** Print progress on stderr (default true). */
  showProgress?: boolean;
}

/** What `rollout` produced. */
export interface RolloutOutput {
  episodes: Episode[];
  /** The rollouts.arrow columns, in row order. */
  columns: Record<string, ColumnInput>;
  /** The `sampling` metadata (generation settings). */
  sampling: Record<string, unknown>;
  /** Generated tokens per second of wall time. */
  tokensPerSecond: number;
  seconds: number;
}

/** Samples `group_size` episodes for each of `tasks` with `policy`. */
export async function rollout(
  policy: Policy,
  tokenizer: ChatTokenizer,
  tasks: readonly Task[],
  o: RolloutStageOptions,
): Promise<RolloutOutput> {
  const { generation: g, environment: e, tools: t } = o.rollout;
  const makeEnv = await environmentFactory(
    { rollout: o.rollout, data: { system_prompt: o.systemPrompt } },
    o.tools,
    new Limiter(t.max_concurrency),
  );
  const bar = new RolloutProgress(tasks.length * o.rollout.group_size, o.showProgress ?? true);
  const started = performance.now();
  const episodes = await runRollout(policy, tokenizer, tasks, makeEnv, {
    groupSize: o.rollout.group_size,
    seed: g.seed,
    step: o.step,
    maxNewTokens: g.max_new_tokens,
    maxTotalTokens: g.max_total_tokens,
    maxTurns: e.max_turns,
    temperature: g.temperature,
    topK: g.top_k,
    topP: g.top_p,
    enableThinking: g.enable_thinking,
    toolSpecs: toolSpecs([...o.tools.values()]),
    groupIds: o.groupIds,
    onEpisode: (episode) => bar.add(episode),
  });
  const seconds = (performance.now() - started) / 1000;
  bar.done(seconds);
  const generated = episodes.reduce((n, ep) => n + ep.sampled.reduce((a, b) => a + b, 0), 0);
  return {
    episodes,
    columns: rolloutColumns(episodes),
    sampling: { ...g, max_turns: e.max_turns, environment: e.kind, tools: [...o.tools.keys()] },
    tokensPerSecond: generated / Math.max(seconds, 1e-9),
    seconds,
  };
}

/** The metadata of a rollouts.arrow written from `out`. */
export async function rolloutMetadata(
  out: RolloutOutput,
  policy: Policy,
  tokenizer: ChatTokenizer,
  config: Config,
  configHash: string,
): Promise<MetadataInput> {
  return {
    config_hash: configHash,
    model: config.model.path,
    adapter: await policy.adapterId(),
    tokenizer_hash: tokenizer.info.tokenizerSha256,
    chat_template_hash: tokenizer.info.chatTemplateSha256,
    sampling: out.sampling,
    seed: config.rollout.generation.seed,
  };
}

/** What one rollout command samples: its step, shard and tasks (every check made before any work). */
export interface RolloutPlan {
  step: number;
  shard?: Shard;
  tasks: Task[];
}

/** Reads `--step`, `--shard` and the tasks of the step; refuses bad flags and too few tasks in one line. */
export async function planRollout(config: Config, flags: StageArgs["flags"]): Promise<RolloutPlan> {
  const step = stepFlag(flags.step);
  const shard = flags.shard !== undefined ? parseShard(String(flags.shard)) : undefined;
  const { train } = splitHeldOut(await loadTasks(config.data), config.eval.num_tasks);
  return { step, shard, tasks: tasksForStep(train, step, config.rollout.tasks_per_step, shard) };
}

async function main(args: StageArgs): Promise<void> {
  const { config } = args;
  const { step, shard, tasks } = await planRollout(config, args.flags);
  const tools = await loadTools(config.rollout.tools);
  checkFreeSpace(args.output!, rolloutFileBytes(config, tasks)); // before any episode is sampled
  const tokenizer = await loadTokenizer(config.model.path);
  progress.log(
    `rollout: loading ${config.model.path}${config.model.adapter ? ` + ${config.model.adapter}` : ""}`,
  );
  const policy = await openPolicy(config.model, policyOptionsOf(config));
  try {
    const out = await rollout(policy, tokenizer, tasks, {
      rollout: config.rollout,
      systemPrompt: config.data.system_prompt,
      step,
      tools,
      groupIds: stepGroupIds(tasks.length, shard),
    });
    const metadata = await rolloutMetadata(out, policy, tokenizer, config, args.configHash);
    await writeStageFile(args.output!, "rollouts", out.columns, metadata);
    console.log(`wrote ${args.output} (${out.episodes.length} episodes)`);
  } finally {
    await policy.close();
  }
}

/** `--step N`: a non-negative integer (default 0). */
function stepFlag(value: unknown): number {
  if (value === undefined) return 0;
  const text = String(value).trim();
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(Number(text))) {
    throw new UserError("rollout: --step", {
      value,
      why: "it must be a whole number, 0 or more (the loop step: which tasks, and part of every seed)",
      fix: "pass e.g. --step 0, or leave --step out",
    });
  }
  return Number(text);
}

if (import.meta.main) {
  await runStageMain({
    name: "rollout",
    summary:
      "Samples multi-turn episodes (chat template, tools, environment, group sampling) from the tasks of `data` into rollouts.arrow.",
    needsOutput: true,
    output: { kind: "stage-file", fileKind: "rollouts" },
    usesModel: true,
    stringFlags: ["step", "shard"],
    flagHelp: [
      "--step N         loop step: which tasks, and part of every seed (default 0)",
      "--shard i/n      take every n-th task of the step, starting at the i-th (0-based)",
    ],
    configFlags: { adapter: "model.adapter" },
    check: async (args) => void await planRollout(args.config, args.flags),
    examples: [
      "deno task rollout --out runs/x/rollouts.arrow",
      "deno task rollout --out runs/x/rollouts.arrow --rollout.generation.temperature=0.7 --rollout.group_size=4",
    ],
    run: main,
  });
}
