/**
 * The warm start's demonstrations: each task planned as a calculator trace or a direct (wrong) answer,
 * then written by the teacher (teacher.ts) through the real rollout, score and mask stages, so
 * `loss_mask` is exactly the policy's `sampled` tokens (the assistant turns, never the prompt or the
 * `<tool_response>` turn) and the traces are exactly the tokens a policy episode would hold — except
 * in a recovery trace (written besides the others), whose broken call is context to recover from: its turn
 * has no loss.
 *
 * @module
 */

import { join } from "node:path";
import type { FlatList } from "../arrow/columns.ts";
import { readStageFiles } from "../arrow/merge.ts";
import { readStageFile } from "../arrow/read.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import { outputTable } from "../arrow/stage_io.ts";
import { mulberry32, randomInt, type Rng } from "../data/random.ts";
import { operationSteps } from "../data/arithmetic_steps.ts";
import type { Task } from "../data/task.ts";
import { UserError } from "../errors.ts";
import { maskColumns, type MaskSummary, trainedCounts } from "../mask/mask_table.ts";
import { rollout, score, type Session, type StageOutput, writeStageOutput } from "../pipeline/mod.ts";
import { toolCallColumns } from "../score/episode.ts";
import {
  calculatorCallText,
  TeacherPolicy,
  type ToolPlan,
  toolTurnTexts,
  type TracePlan,
} from "./teacher.ts";
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
 * A miscopied call, in the two ways the demo's policy breaks one: a stray `": "` inside the expression
 * (invalid JSON, e.g. `"expression": "1": "2 + 3"`), or the call cut short inside the expression (the turn
 * ends inside the JSON).
 */
export function brokenCallText(expression: string, rng: Rng): string {
  return rng() < 0.5 ? strayQuoteCall(expression, rng) : cutShortCall(expression, rng);
}

/** The call with `": "` inserted at a random place inside its expression. */
function strayQuoteCall(expression: string, rng: Rng): string {
  const [text, at] = callSplit(expression, rng);
  return `${text.slice(0, at)}": "${text.slice(at)}`;
}

/** The call cut at a random place inside its expression. */
function cutShortCall(expression: string, rng: Rng): string {
  const [text, at] = callSplit(expression, rng);
  return text.slice(0, at);
}

/** The call's text and a random place inside its expression (after its first character, before its last). */
function callSplit(expression: string, rng: Rng): [string, number] {
  const text = calculatorCallText(expression);
  const start = text.indexOf(JSON.stringify(expression)) + 1;
  return [text, start + randomInt(rng, 1, expression.length - 1)];
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

/**
 * The recovery traces, written besides the others: for a seeded share `recoveryFraction` of the tasks
 * with a calculator trace, the same calls with one of them, drawn at random, written broken first
 * (`brokenCallText`).
 */
export function recoveryPlans(
  tasks: readonly Task[],
  plans: ReadonlyMap<string, TracePlan>,
  s: WarmStartSettings,
): Map<string, ToolPlan> {
  const rng = mulberry32(s.seed * 7919 + 3); // a third stream: the other plans are drawn as without it
  const out = new Map<string, ToolPlan>();
  for (const task of tasks) {
    const plan = plans.get(task.id);
    if (plan?.kind !== "tool" || !(rng() < s.recoveryFraction)) continue;
    const at = randomInt(rng, 0, plan.calls.length - 1);
    out.set(task.id, { ...plan, broken: { at, text: brokenCallText(plan.calls[at], rng) } });
  }
  return out;
}

/** Refuses plans longer than `rollout.environment.max_turns`: their episodes would end before the answer. */
function requireTurns(plans: Iterable<TracePlan>, maxTurns: number): void {
  let most = 1;
  for (const plan of plans) if (plan.kind === "tool") most = Math.max(most, toolTurnTexts(plan).length + 1);
  if (most <= maxTurns) return;
  throw new UserError(`rollout.environment.max_turns: ${maxTurns}`, {
    why: `the warm start's longest trace has ${most} assistant turns (its calls, a recovery trace's broken ` +
      "call, the answer), so its episode would end before the final answer",
    fix: `set rollout.environment.max_turns to ${most} or more, or demo.warm_start.recovery_fraction to 0`,
  });
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
 * Writes the warm start's traces through the rollout, score and mask stages: one per task in task order
 * (`dir/traces/rollouts.arrow`), then the recovery traces (`recoveryPlans`) in task order
 * (`recovery_rollouts.arrow`, rollout step 1 so that their episode ids differ), scored and masked as one
 * table (`scored.arrow`, `batch.arrow`). Returns the batch file's path.
 */
export async function writeWarmStartBatch(i: WarmStartInputs): Promise<string> {
  const { session, settings } = i;
  const tasks = i.tasks.slice(0, settings.traces);
  const plans = tracePlans(tasks, settings, session.config.rollout.tools.calculator.max_operations);
  const recovery = recoveryPlans(tasks, plans, settings);
  requireTurns([...plans.values(), ...recovery.values()], session.config.rollout.environment.max_turns);
  const tokenizer = await session.tokenizer();
  const dir = join(i.dir, "traces");
  await Deno.mkdir(dir, { recursive: true });
  const file = (kind: string) => join(dir, `${kind}.arrow`);
  const write = async (name: string, step: number, part: Task[], plan: (task: Task) => TracePlan) => {
    const traces = await rollout(session, part, {
      step,
      // Distinct groups across both files (the sft loss reads no advantages, but the batch stays sound).
      groupIds: part.map((_, k) => step * settings.traces + k),
      policy: new TeacherPolicy(tokenizer, part, plan),
      settings: { ...session.config.rollout, group_size: 1 },
      metadata: { adapter: "teacher", sampling: { source: "demo teacher" }, seed: settings.seed },
    });
    await writeStageOutput(file(name), traces);
    return file(name);
  };
  const parts = [await write("rollouts", 0, tasks, (task) => plans.get(task.id)!)];
  const broken = tasks.filter((task) => recovery.has(task.id));
  if (broken.length > 0) parts.push(await write("recovery_rollouts", 1, broken, (t) => recovery.get(t.id)!));
  await writeStageOutput(file("scored"), await score(session, await readStageFiles(parts, "rollouts")));
  await writeStageOutput(file("batch"), traceBatch(session, await readStageFile(file("scored"), "scored")));
  return file("batch");
}

/**
 * The mask stage's batch (as pipeline/mask.ts), with no loss on any turn whose tool call failed: in a
 * recovery trace the broken call is what the policy reads and recovers from, never what it imitates.
 */
function traceBatch(session: Session, scored: StageFile): StageOutput<"batch", MaskSummary> {
  const { columns, summary } = maskColumns(scored, { config: session.config.mask });
  const lossMask = columns.loss_mask as FlatList<Uint8Array>;
  const calls = toolCallColumns(scored);
  const turns = scored.listColumn<Int16Array>("turn_idx");
  for (let row = 0; row < scored.rows; row++) {
    for (let k = calls.offsets[row]; k < calls.offsets[row + 1]; k++) {
      if (calls.status[k] === "ok") continue;
      const [mask, turn] = [lossMask.at(row), turns.at(row)];
      for (let t = 0; t < mask.length; t++) if (turn[t] === calls.turn[k]) mask[t] = 0;
    }
  }
  const advantages = (columns.advantages as FlatList<Float32Array>).values;
  const table = outputTable(scored, "batch", columns, { config_hash: session.configHash });
  return { kind: "batch", table, summary: { ...summary, ...trainedCounts(lossMask.values, advantages) } };
}
