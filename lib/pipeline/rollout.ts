/**
 * The rollout stage: `group_size` multi-turn episodes for each task, sampled with the session's policy
 * (chat template, tools, environment, continuous batching), as the rollouts table (lib/rollout/ does the
 * episodes; this file turns a request into them and them into the table and its metadata).
 *
 * @module
 */

import type { MetadataInput } from "../arrow/metadata.ts";
import { buildTable } from "../arrow/write.ts";
import { type FlatList, listFromArrays } from "../arrow/columns.ts";
import { trainScalarsOf } from "./train.ts";
import type { RolloutConfig } from "../config/schema.ts";
import type { Task } from "../data/task.ts";
import type { Policy } from "../engine/policy.ts";
import { rolloutColumns } from "../rollout/columns.ts";
import { environmentFactory } from "../rollout/environments.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { Tool } from "../tools/types.ts";
import { agentRollout } from "./agent_rollout.ts";
import { Limiter } from "../rollout/limiter.ts";
import { RolloutProgress } from "../rollout/progress.ts";
import { type Episode, runRollout } from "../rollout/rollout.ts";
import { toolSpecs } from "../tools/registry.ts";
import { toolCallGuide } from "../rollout/guided_calls.ts";
import type { StageOutput } from "./output.ts";
import type { Session } from "./session.ts";

/** What one rollout samples, beyond the tasks. */
export interface RolloutRequest {
  /** Loop step: part of every seed and episode id (0 for a single rollout). */
  step: number;
  /** Group ids of the tasks (default their index; a shard passes its tasks' places in the step). */
  groupIds?: readonly number[];
  /** Rollout settings (default the session's `rollout`); the evaluation passes its own sampling. */
  settings?: RolloutConfig;
  /** Sample with this policy instead of the session's (the demo's teacher writes its traces so). */
  policy?: Policy;
  /** Metadata replacing the defaults; `sampling` is merged into the generation settings (the teacher's
   * traces name their source this way). */
  metadata?: Partial<MetadataInput>;
  /**
   * Write per-token `values` (the values pass, lib/train/values_pass.ts); default: when the algorithm
   * has a value head (mask.estimator gae). The evaluation passes false.
   */
  values?: boolean;
}

export interface RolloutSummary {
  episodes: number;
  /** Generated tokens per second of wall time. */
  tokensPerSecond: number;
  seconds: number;
}

/** The rollouts table, plus the episodes as the rollout produced them. */
export interface RolloutOutput extends StageOutput<"rollouts", RolloutSummary> {
  episodes: Episode[];
}

/** Samples the episodes of `tasks` (`group_size` each) with the session's policy. */
export async function rollout(
  session: Session,
  tasks: readonly Task[],
  request: RolloutRequest,
): Promise<RolloutOutput> {
  const { config } = session;
  const settings = request.settings ?? config.rollout;
  const { generation: g, environment: e } = settings;
  const [policy, tokenizer, tools] = await Promise.all([
    request.policy ?? session.policy(),
    session.tokenizer(),
    session.tools(),
  ]);
  const bar = new RolloutProgress(tasks.length * settings.group_size, session.showProgress);
  const started = performance.now();
  let episodes: Episode[];
  try {
    episodes = e.kind === "agent"
      ? await agentRollout(policy, tasks, {
        modelDir: config.model.path,
        settings,
        step: request.step,
        groupIds: request.groupIds,
        configHash: session.configHash,
        onEpisode: (episode) => bar.add(episode),
      })
      : await sampleEpisodes(
        policy,
        tokenizer,
        tools,
        tasks,
        settings,
        config.data.system_prompt,
        request,
        bar,
      );
  } finally {
    bar.close(); // its heartbeat, also when sampling fails
  }
  const seconds = (performance.now() - started) / 1000;
  bar.done(seconds);
  const sampling = { ...g, max_turns: e.max_turns, environment: e.kind, tools: [...tools.keys()] };
  const { sampling: extra, ...given } = request.metadata ?? {};
  const metadata: MetadataInput = {
    config_hash: session.configHash,
    model: config.model.path,
    adapter: await policy.adapterId(),
    tokenizer_hash: tokenizer.info.tokenizerSha256,
    chat_template_hash: tokenizer.info.chatTemplateSha256,
    sampling: { ...sampling, ...extra },
    seed: g.seed,
    ...given,
  };
  const generated = episodes.reduce((n, ep) => n + ep.sampled.reduce((a, b) => a + b, 0), 0);
  const columns = rolloutColumns(episodes);
  if (request.values ?? session.hasValueHead) columns.values = await valuesColumn(session, episodes);
  return {
    kind: "rollouts",
    table: buildTable("(rollouts)", "rollouts", columns, metadata),
    summary: { episodes: episodes.length, tokensPerSecond: generated / Math.max(seconds, 1e-9), seconds },
    episodes,
  };
}

/** The episodes of `tasks` sampled by the rollout stage itself, its environment answering each turn. */
async function sampleEpisodes(
  policy: Policy,
  tokenizer: ChatTokenizer,
  tools: ReadonlyMap<string, Tool>,
  tasks: readonly Task[],
  settings: RolloutConfig,
  systemPrompt: string | null,
  request: RolloutRequest,
  bar: RolloutProgress,
): Promise<Episode[]> {
  const { generation: g, environment: e } = settings;
  const makeEnv = await environmentFactory(
    { rollout: settings, data: { system_prompt: systemPrompt } },
    tools,
    new Limiter(settings.tools.max_concurrency),
  );
  const specs = toolSpecs([...tools.values()]);
  return await runRollout(policy, tokenizer, tasks, makeEnv, {
    groupSize: settings.group_size,
    seed: g.seed,
    step: request.step,
    maxNewTokens: g.max_new_tokens,
    maxTotalTokens: g.max_total_tokens,
    maxTurns: e.max_turns,
    temperature: g.temperature,
    topK: g.top_k,
    topP: g.top_p,
    enableThinking: g.enable_thinking,
    toolSpecs: specs,
    toolCallGuide: g.guided_tool_calls
      ? toolCallGuide(tokenizer, specs, policy.config.vocab_size)
      : undefined,
    groupIds: request.groupIds,
    onEpisode: (episode) => bar.add(episode),
  });
}

/** The values pass over `episodes` with the session's trainer (its adapter and value head). */
async function valuesColumn(session: Session, episodes: readonly Episode[]): Promise<FlatList<Float32Array>> {
  const { config } = session;
  const started = performance.now();
  const ts = await session.trainer();
  const { valuesOf } = await import("../train/values_pass.ts");
  const { adapter, value } = ts.checkpoint;
  if (!value) throw new Error("rollout: values asked for, and the trainer has no value head");
  const values = await valuesOf(ts.trainer, episodes, adapter.weights, value.weights, {
    scalars: { ...trainScalarsOf(config), temperature: config.rollout.generation.temperature },
    microBatchTokens: config.train.micro_batch_tokens,
  });
  if (session.showProgress) {
    session.progress.log(
      `rollout: values of ${episodes.length} episodes in ${
        ((performance.now() - started) / 1000).toFixed(1)
      } s`,
    );
  }
  return listFromArrays(values);
}
