/**
 * The warm start's demonstrations: each task planned as a calculator trace or a direct (wrong) answer,
 * then written by the teacher (teacher.ts) through the real rollout, score and mask stages, so
 * `loss_mask` is exactly the policy's `sampled` tokens (the assistant turns, never the prompt or the
 * `<tool_response>` turn) and the traces are exactly the tokens a policy episode would hold.
 *
 * @module
 */

import { join } from "node:path";
import { readStageFile } from "../arrow/read.ts";
import { writeStageFile } from "../arrow/write.ts";
import type { Config } from "../config/schema.ts";
import { mulberry32, randomInt } from "../data/random.ts";
import type { Task } from "../data/task.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import { writeTable } from "../arrow/stage_io.ts";
import type { Tool } from "../tools/types.ts";
import { rollout } from "../../stages/rollout.ts";
import { score } from "../../stages/score.ts";
import { mask } from "../../stages/mask.ts";
import { TeacherPolicy, type TracePlan } from "./teacher.ts";
import type { WarmStartSettings } from "./settings.ts";

/** A plausible wrong answer: the right one moved by a random nonzero offset of up to ~20% (at least ±9). */
export function wrongAnswer(answer: string, rng: () => number): string {
  const value = Number(answer);
  const reach = Math.max(9, Math.round(Math.abs(value) / 5));
  const offset = randomInt(rng, 1, reach) * (rng() < 0.5 ? -1 : 1);
  return String(value + offset);
}

/** Each task's trace: `direct` for a seeded share `directFraction` of them, else a calculator call. */
export function tracePlans(tasks: readonly Task[], s: WarmStartSettings): Map<string, TracePlan> {
  const [choice, numbers] = [mulberry32(s.seed), mulberry32(s.seed + 1)];
  const plans = new Map<string, TracePlan>();
  for (const task of tasks) {
    const direct = choice() < s.directFraction;
    plans.set(
      task.id,
      direct ? { kind: "direct", answer: wrongAnswer(task.answer!, numbers) } : { kind: "tool" },
    );
  }
  return plans;
}

/** What the warm start needs from the run. */
export interface WarmStartInputs {
  config: Config;
  configHash: string;
  tokenizer: ChatTokenizer;
  tools: ReadonlyMap<string, Tool>;
  /** Training tasks: the first `settings.traces` become traces. */
  tasks: readonly Task[];
  settings: WarmStartSettings;
  /** Directory for the trace files (`traces-NNN/{rollouts,batch}.arrow`) and the adapter (`adapter/`). */
  dir: string;
}

/**
 * Writes the warm start's traces as batch files of `tracesPerStep` traces each (through rollout, score
 * and mask: `dir/traces-NNN/{rollouts,batch}.arrow`), rows in task order; returns the batch files' paths.
 */
export async function writeWarmStartBatches(i: WarmStartInputs): Promise<string[]> {
  const tasks = i.tasks.slice(0, i.settings.traces);
  const plans = tracePlans(tasks, i.settings);
  const teacher = new TeacherPolicy(i.tokenizer, tasks, (task) => plans.get(task.id)!);
  const paths: string[] = [];
  for (let start = 0, k = 0; start < tasks.length; start += i.settings.tracesPerStep, k++) {
    const dir = join(i.dir, `traces-${String(k).padStart(3, "0")}`);
    const chunk = tasks.slice(start, start + i.settings.tracesPerStep);
    paths.push(await writeTraceBatch(i, teacher, chunk, dir));
  }
  return paths;
}

/** One batch file of teacher traces for `tasks`, in `dir`. */
async function writeTraceBatch(i: WarmStartInputs, teacher: TeacherPolicy, tasks: Task[], dir: string) {
  const { config } = i;
  const out = await rollout(teacher, i.tokenizer, tasks, {
    rollout: { ...config.rollout, group_size: 1 },
    systemPrompt: config.data.system_prompt,
    step: 0,
    tools: i.tools,
    showProgress: false,
  });
  await Deno.mkdir(dir, { recursive: true });
  const rolloutsPath = join(dir, "rollouts.arrow");
  await writeStageFile(rolloutsPath, "rollouts", out.columns, {
    config_hash: i.configHash,
    model: config.model.path,
    adapter: "teacher",
    tokenizer_hash: i.tokenizer.info.tokenizerSha256,
    chat_template_hash: i.tokenizer.info.chatTemplateSha256,
    sampling: { ...out.sampling, source: "demo teacher" },
    seed: i.settings.seed,
  });
  const { tools: t } = config.rollout;
  const scored = await score(await readStageFile(rolloutsPath, "rollouts"), {
    config: config.score,
    sandbox: { kind: t.sandbox, unsafeNoSandbox: t.unsafe_no_sandbox },
    configHash: i.configHash,
  });
  const batch = mask(scored.table, { config: config.mask, configHash: i.configHash });
  const batchPath = join(dir, "batch.arrow");
  await writeTable(batchPath, "batch", batch.table);
  return batchPath;
}
