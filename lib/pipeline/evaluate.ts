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

import type { ColumnInput } from "../arrow/build.ts";
import { buildTable } from "../arrow/write.ts";
import type { Task } from "../data/task.ts";
import type { StageOutput } from "./output.ts";
import { rollout } from "./rollout.ts";
import { score } from "./score.ts";
import type { Session } from "./session.ts";

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

/** What one evaluation runs. */
export interface EvalRequest {
  /** The loop step it follows (part of every seed and episode id; 0 outside a loop). */
  step: number;
  /** The tasks (default the session's held-out split). */
  tasks?: readonly Task[];
}

/** Evaluates the session's policy on the held-out tasks (or `request.tasks`): the eval table. */
export async function evaluate(
  session: Session,
  request: EvalRequest,
): Promise<StageOutput<"eval", EvalSummary>> {
  const { config } = session;
  const e = config.eval;
  const tasks = request.tasks ?? (await session.tasks()).heldOut;
  const generation = { ...config.rollout.generation, temperature: e.temperature, seed: e.seed };
  const out = await rollout(session, tasks, {
    step: request.step,
    settings: { ...config.rollout, group_size: e.samples, generation },
    metadata: { config_hash: "" },
    values: false,
  });
  const { table } = await score(session, out.table, { step: request.step });
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
    tool_calls_ok: Int16Array.from(eps.map((ep) => ep.toolCalls.filter((c) => c.status === "ok").length)),
    ...rewardColumns,
  };
  const policy = await session.policy();
  const metadata = {
    config_hash: session.configHash,
    model: config.model.path,
    adapter: await policy.adapterId(),
    sampling: { temperature: e.temperature, samples: e.samples },
    seed: e.seed,
  };
  return {
    kind: "eval",
    table: buildTable("(eval)", "eval", columns, metadata),
    summary: summarize(eps.map((ep) => ep.taskId), correct, usedTool, reward, e.samples),
  };
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
