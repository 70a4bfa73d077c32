/**
 * Evaluation: accuracy, pass@k and tool use of a policy on the held-out tasks, through the same rollout
 * code, tools and rewards as training (only the sampling differs: `eval.temperature`, 0 = greedy, and
 * `eval.samples` episodes per task). One row per episode in eval.arrow.
 *
 * pass@k with k = samples is the fraction of tasks with at least one correct episode (with n = k samples
 * the unbiased estimator of Chen et al. 2021 reduces to exactly this).
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import type { Task } from "../data/task.ts";
import type { Policy } from "../engine/policy.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { ColumnInput } from "../arrow/build.ts";
import { buildTable } from "../arrow/write.ts";
import type { Tool } from "../tools/types.ts";
import { rollout } from "../../stages/rollout.ts";
import { score } from "../../stages/score.ts";

/** What an evaluation produced. */
export interface EvalResult {
  columns: Record<string, ColumnInput>;
  summary: EvalSummary;
}

export interface EvalSummary {
  episodes: number;
  tasks: number;
  accuracy: number;
  /** k = eval.samples. */
  pass_at_k: number;
  k: number;
  /** Fraction of episodes with a tool call that ran without error. */
  tool_use_rate: number;
  reward_mean: number;
}

/** Evaluates `policy` on `tasks` (the held-out split). */
export async function evaluate(
  policy: Policy,
  tokenizer: ChatTokenizer,
  tasks: readonly Task[],
  config: Config,
  tools: ReadonlyMap<string, Tool>,
  options: { step: number; showProgress?: boolean },
): Promise<EvalResult> {
  const e = config.eval;
  const sampling = { ...config.rollout.generation, temperature: e.temperature, seed: e.seed };
  const out = await rollout(policy, tokenizer, tasks, {
    rollout: { ...config.rollout, group_size: e.samples, generation: sampling },
    systemPrompt: config.data.system_prompt,
    step: options.step,
    tools,
    showProgress: options.showProgress,
  });
  const rolloutsTable = buildTable("(eval rollouts)", "rollouts", out.columns, {
    config_hash: "",
    model: config.model.path,
    adapter: await policy.adapterId(),
    tokenizer_hash: tokenizer.info.tokenizerSha256,
    chat_template_hash: tokenizer.info.chatTemplateSha256,
    sampling: out.sampling,
    seed: e.seed,
  });
  const { table } = await score(rolloutsTable, {
    config: config.score,
    sandbox: { kind: config.rollout.tools.sandbox, unsafeNoSandbox: config.rollout.tools.unsafe_no_sandbox },
  });
  const reward = Array.from(table.getChild("reward")!.toArray() as Float32Array);
  const correct = Array.from({ length: table.numRows }, (_, i) => Boolean(table.getChild("correct")!.get(i)));
  const rewardColumns = Object.fromEntries(
    table.schema.fields.filter((f) => /^reward_/.test(f.name)).map((f) => [f.name, table.getChild(f.name)!]),
  );
  const eps = out.episodes;
  const usedTool = eps.map((ep) => ep.toolCalls.some((c) => c.status === "ok"));
  const columns: Record<string, ColumnInput> = {
    episode_id: eps.map((ep) => ep.episodeId),
    task_id: eps.map((ep) => ep.taskId),
    sample_idx: Int32Array.from(eps.map((ep) => ep.sampleIdx)),
    policy_version: eps.map((ep) => ep.policyVersion),
    reward: Float32Array.from(reward),
    correct,
    num_turns: Int16Array.from(eps.map((ep) => ep.numTurns)),
    tokens_generated: Int32Array.from(eps.map((ep) => ep.sampled.reduce((a, b) => a + b, 0))),
    finish_reason: eps.map((ep) => ep.finishReason),
    status: eps.map((ep) => ep.status),
    messages: eps.map((ep) => JSON.stringify(ep.messages)),
    num_tool_calls: Int16Array.from(eps.map((ep) => ep.toolCalls.length)),
    used_tool: usedTool,
    ...rewardColumns,
  };
  return { columns, summary: summarize(eps.map((ep) => ep.taskId), correct, usedTool, reward, e.samples) };
}

function summarize(
  taskIds: string[],
  correct: boolean[],
  usedTool: boolean[],
  reward: number[],
  k: number,
): EvalSummary {
  const n = Math.max(correct.length, 1);
  const solved = new Map<string, boolean>();
  taskIds.forEach((id, i) => solved.set(id, (solved.get(id) ?? false) || correct[i]));
  return {
    episodes: correct.length,
    tasks: solved.size,
    accuracy: correct.filter(Boolean).length / n,
    pass_at_k: [...solved.values()].filter(Boolean).length / Math.max(solved.size, 1),
    k,
    tool_use_rate: usedTool.filter(Boolean).length / n,
    reward_mean: reward.reduce((a, b) => a + b, 0) / n,
  };
}

/** `eval: accuracy 0.41 pass@4 0.62 tool use 0.55 reward 0.47 (200 tasks, 200 episodes)`. */
export function evalSummaryLine(s: EvalSummary): string {
  return `eval: accuracy ${s.accuracy.toFixed(3)} pass@${s.k} ${s.pass_at_k.toFixed(3)} ` +
    `tool use ${s.tool_use_rate.toFixed(3)} reward ${s.reward_mean.toFixed(3)} ` +
    `(${s.tasks} tasks, ${s.episodes} episodes)`;
}
