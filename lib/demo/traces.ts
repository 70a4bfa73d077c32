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
import { mulberry32, randomInt } from "../data/random.ts";
import { operationSteps } from "../data/arithmetic_steps.ts";
import type { Task } from "../data/task.ts";
import { mask, rollout, score, type Session, writeStageOutput } from "../pipeline/mod.ts";
import { TeacherPolicy, type TracePlan } from "./teacher.ts";
import type { WarmStartSettings } from "./settings.ts";

/** A plausible wrong answer: the right one moved by a random nonzero offset of up to ~20% (at least ±9). */
export function wrongAnswer(answer: string, rng: () => number): string {
  const value = Number(answer);
  const reach = Math.max(9, Math.round(Math.abs(value) / 5));
  const offset = randomInt(rng, 1, reach) * (rng() < 0.5 ? -1 : 1);
  return String(value + offset);
}

/**
 * The expressions of a task's calculator calls: the whole expression, or, when it holds more than
 * `maxOperations` operations, one call per operation step, each holding the result of the one before.
 */
export function calculatorCalls(task: Task, maxOperations: number | null): string[] {
  const expression = String(task.meta?.expression ?? "");
  if (maxOperations === null) return [expression];
  const steps = operationSteps(expression);
  return steps.length <= maxOperations ? [expression] : steps.map((step) => step.expression);
}

/**
 * Each task's trace: `direct` for a seeded share `directFraction` of them, else calculator calls
 * (`calculatorCalls`, for a calculator limited to `maxOperations` per call).
 */
export function tracePlans(
  tasks: readonly Task[],
  s: WarmStartSettings,
  maxOperations: number | null = null,
): Map<string, TracePlan> {
  // Two streams per seed, apart from the next seed's.
  const [choice, numbers] = [mulberry32(s.seed * 7919 + 1), mulberry32(s.seed * 7919 + 2)];
  const plans = new Map<string, TracePlan>();
  for (const task of tasks) {
    const direct = choice() < s.directFraction;
    plans.set(
      task.id,
      direct
        ? { kind: "direct", answer: wrongAnswer(task.answer!, numbers) }
        : { kind: "tool", calls: calculatorCalls(task, maxOperations) },
    );
  }
  return plans;
}

/** What the warm start needs from the run. */
export interface WarmStartInputs {
  /** The warm start's session: the run's config with the sft loss (warm_start.ts `warmStartConfig`). */
  session: Session;
  /** Training tasks: the first `settings.traces` become traces. */
  tasks: readonly Task[];
  settings: WarmStartSettings;
  /** Directory for the trace files (`traces/{rollouts,scored,batch}.arrow`) and the adapter (`adapter/`). */
  dir: string;
}

/**
 * Writes the warm start's traces, one per task in task order, through the rollout, score and mask
 * stages (`dir/traces/{rollouts,scored,batch}.arrow`); returns the batch file's path.
 */
export async function writeWarmStartBatch(i: WarmStartInputs): Promise<string> {
  const { session, settings } = i;
  const tasks = i.tasks.slice(0, settings.traces);
  const plans = tracePlans(tasks, settings, session.config.rollout.tools.calculator.max_operations);
  const teacher = new TeacherPolicy(await session.tokenizer(), tasks, (task) => plans.get(task.id)!);
  const dir = join(i.dir, "traces");
  await Deno.mkdir(dir, { recursive: true });
  const file = (kind: string) => join(dir, `${kind}.arrow`);
  const traces = await rollout(session, tasks, {
    step: 0,
    policy: teacher,
    settings: { ...session.config.rollout, group_size: 1 },
    metadata: { adapter: "teacher", sampling: { source: "demo teacher" }, seed: settings.seed },
  });
  await writeStageOutput(file("rollouts"), traces);
  await writeStageOutput(
    file("scored"),
    await score(session, await readStageFile(file("rollouts"), "rollouts")),
  );
  await writeStageOutput(file("batch"), mask(session, await readStageFile(file("scored"), "scored")));
  return file("batch");
}
