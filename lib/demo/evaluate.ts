/**
 * Held-out evaluation for the demo: tasks disjoint from the training tasks, greedy episodes through the
 * rollout stage and its tools, scored by the score stage: accuracy (share of `correct` episodes) and
 * tool-use rate (share of episodes with a calculator call that ran without error).
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import type { Task } from "../data/task.ts";
import type { Policy } from "../engine/policy.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { Tool } from "../tools/types.ts";
import { rollout, type RolloutOutput } from "../../stages/rollout.ts";
import { score } from "../../stages/score.ts";
import type { Table } from "apache-arrow";
import { buildTable } from "../arrow/write.ts";
import { IN_MEMORY } from "../score/stage_io.ts";
import { toolSucceeded } from "../score/tool_status.ts";

/**
 * The data set split as the eval stage splits it: the last `heldOut` tasks are held out, and training
 * (warm-start traces and GRPO steps) only ever sees the tasks before them.
 */
export function splitHeldOut(tasks: readonly Task[], heldOut: number): { train: Task[]; heldOut: Task[] } {
  if (heldOut >= tasks.length) {
    throw new UserError("demo: the held-out split", {
      value: heldOut,
      why: `it leaves no training tasks (the data set has ${tasks.length})`,
      fix: "raise data.arithmetic.num_tasks or lower eval.num_tasks",
    });
  }
  return { train: tasks.slice(0, tasks.length - heldOut), heldOut: tasks.slice(tasks.length - heldOut) };
}

/** One evaluation's numbers and its scored table (the rollout columns plus rewards). */
export interface DemoEval {
  accuracy: number;
  toolUseRate: number;
  episodes: number;
  seconds: number;
  scored: Table;
  rollout: RolloutOutput;
}

/** Greedy episodes of `policy` (its current adapter) on `tasks`, one per task, scored. */
export async function evaluatePolicy(
  policy: Policy,
  tokenizer: ChatTokenizer,
  tasks: readonly Task[],
  config: Config,
  tools: ReadonlyMap<string, Tool>,
): Promise<DemoEval> {
  const started = performance.now();
  const generation = { ...config.rollout.generation, temperature: 0 };
  const out = await rollout(policy, tokenizer, tasks, {
    rollout: { ...config.rollout, group_size: 1, generation },
    systemPrompt: config.data.system_prompt,
    step: 0,
    tools,
    showProgress: false,
  });
  const { tools: t } = config.rollout;
  const rollouts = buildTable(IN_MEMORY, "rollouts", out.columns, {
    config_hash: "",
    model: config.model.path,
    adapter: await policy.adapterId(),
    tokenizer_hash: tokenizer.info.tokenizerSha256,
    chat_template_hash: tokenizer.info.chatTemplateSha256,
    sampling: out.sampling,
    seed: 0,
  });
  const { table, summary } = await score(rollouts, {
    config: config.score,
    sandbox: { kind: t.sandbox, unsafeNoSandbox: t.unsafe_no_sandbox },
  });
  const used = out.episodes.filter((e) => e.toolCalls.some((c) => toolSucceeded(c.status))).length;
  return {
    accuracy: summary.accuracy,
    toolUseRate: used / Math.max(out.episodes.length, 1),
    episodes: out.episodes.length,
    seconds: (performance.now() - started) / 1000,
    scored: table,
    rollout: out,
  };
}
