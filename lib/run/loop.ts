/**
 * The loop: N steps of rollout → score → mask → train in one run directory (layout.ts), the stage
 * functions called in this process with the policy kept loaded and its adapter switched between steps.
 *
 * Step s (1-based) samples the tasks of `tasksForStep(train split, s)` with seeds from (run seed, s,
 * task, sample), writes `step-s/{rollouts,scored,batch,metrics}.arrow`, trains the adapter of step s − 1
 * (none at step 1: `model.adapter` or a fresh one) into `adapters/step-s/`, appends its row to
 * `metrics.arrow`, evaluates on the held-out split every `loop.eval_every` steps (and before step 1),
 * and writes `latest` last. A step killed halfway is redone whole on `--resume`, from the adapter and
 * optimizer state `latest` names, so a resumed run repeats an uninterrupted one.
 *
 * @module
 */

import { copyFile } from "node:fs/promises";
import { dirname } from "node:path";
import { rolloutFileBytes } from "../arrow/estimate.ts";
import { readStageFile } from "../arrow/read.ts";
import { writeStageFile } from "../arrow/write.ts";
import { writeTextAtomic } from "../fs/atomic.ts";
import type { Config } from "../config/schema.ts";
import { loadTasks, type Task } from "../data/mod.ts";
import { checkFreeSpace } from "../fs/disk_space.ts";
import type { Policy } from "../engine/policy.ts";
import { openPolicy } from "../engine/open_policy.ts";
import { policyOptionsOf } from "../engine/policy_options.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import { loadTokenizer } from "../model/tokenizer.ts";
import { requireHeldOut, splitHeldOut, tasksForStep } from "../rollout/tasks.ts";
import { loadTools } from "../tools/registry.ts";
import type { Tool } from "../tools/types.ts";
import { evalSummaryLine, evaluate } from "../eval/evaluate.ts";
import { writeTable } from "../arrow/stage_io.ts";
import { progress } from "../progress.ts";
import { rollout, rolloutMetadata } from "../../stages/rollout.ts";
import { score } from "../../stages/score.ts";
import { mask } from "../../stages/mask.ts";
import { train, trainOptionsOf } from "../../stages/train.ts";
import { writeReport } from "../../stages/report.ts";
import { RunLayout, stepName } from "./layout.ts";
import { acquireRunLock } from "./lock.ts";
import { completedSteps, keepRows, writeRunMetrics } from "./run_files.ts";
import { checkResumable, writeSnapshot } from "./snapshot.ts";
import { stepLine, stepMetricsRow } from "./step_metrics.ts";

export interface LoopOptions {
  /** Continue the run in `loop.run_dir` from its `latest` step. */
  resume: boolean;
  /** Print progress (default true). */
  showProgress?: boolean;
}

/** What the loop did. */
export interface LoopResult {
  dir: string;
  /** The last complete step. */
  step: number;
  /** Held-out evaluations by step. */
  evals: Map<number, ReturnType<typeof evalSummaryLine>>;
}

/** Everything a step needs, loaded once. */
interface RunContext {
  config: Config;
  configHash: string;
  layout: RunLayout;
  policy: Policy;
  tokenizer: ChatTokenizer;
  tools: ReadonlyMap<string, Tool>;
  train: Task[];
  heldOut: Task[];
  rows: Record<string, number>[];
  show: boolean;
}

/** Runs (or resumes) the loop of `config.loop`. */
export async function runLoop(config: Config, configHash: string, o: LoopOptions): Promise<LoopResult> {
  if (config.loop.eval_every > 0) {
    requireHeldOut(
      config.eval.num_tasks,
      "the loop (loop.eval_every > 0)",
      "set eval.num_tasks to 1 or more",
    );
  }
  const layout = new RunLayout(config.loop.run_dir);
  await Deno.mkdir(layout.dir, { recursive: true });
  const release = await acquireRunLock(layout.lock);
  let policy: Policy | null = null;
  try {
    const done = o.resume ? await completedSteps(layout) : 0;
    if (o.resume) await checkResumable(layout, config);
    await writeSnapshot(layout, config);
    const tasks = splitHeldOut(await loadTasks(config.data), config.eval.num_tasks);
    const adapter = done > 0 ? layout.adapter(done) : config.model.adapter;
    policy = await openPolicy({ ...config.model, adapter }, policyOptionsOf(config, adapter));
    const ctx: RunContext = {
      config,
      configHash,
      layout,
      policy,
      tokenizer: await loadTokenizer(config.model.path),
      tools: await loadTools(config.rollout.tools),
      train: tasks.train,
      heldOut: tasks.heldOut,
      rows: await keepRows(layout, done),
      show: o.showProgress ?? true,
    };
    const evals = new Map<number, string>();
    if (done === 0 && config.loop.eval_every > 0) evals.set(0, await evalStep(ctx, 0));
    for (let step = done + 1; step <= config.loop.steps; step++) {
      await runStep(ctx, step);
      if (isEvalStep(config, step)) evals.set(step, await evalStep(ctx, step));
      await writeTextAtomic(layout.latest, `${stepName(step)}\n`); // last: the step is complete
      await pruneAdapter(ctx, step - 1);
    }
    await writeReport(layout.dir, layout.report);
    if (ctx.show) progress.log(`loop: report ${layout.report}`);
    return { dir: layout.dir, step: Math.max(done, config.loop.steps), evals };
  } finally {
    await policy?.close();
    await release();
  }
}

/** One step: rollout → score → mask → train, each stage's file written as it is made. */
async function runStep(ctx: RunContext, step: number): Promise<void> {
  const { config, layout, policy } = ctx;
  await Deno.mkdir(layout.stepDir(step), { recursive: true });
  const seconds = { rollout: 0, score: 0, mask: 0, train: 0 };
  const timed = async <T>(stage: keyof typeof seconds, f: () => Promise<T> | T): Promise<T> => {
    const started = performance.now();
    const value = await f();
    seconds[stage] = (performance.now() - started) / 1000;
    return value;
  };
  const tasks = tasksForStep(ctx.train, step, config.rollout.tasks_per_step);
  // Room for the step's rollouts, scored and batch files, before any episode is sampled.
  checkFreeSpace(layout.stepDir(step), 3 * rolloutFileBytes(config, tasks, "batch"));
  const out = await timed("rollout", () =>
    rollout(policy, ctx.tokenizer, tasks, {
      rollout: config.rollout,
      systemPrompt: config.data.system_prompt,
      step,
      tools: ctx.tools,
      showProgress: ctx.show,
    }));
  const meta = await rolloutMetadata(out, policy, ctx.tokenizer, config, ctx.configHash);
  await writeStageFile(layout.stepFile(step, "rollouts"), "rollouts", out.columns, meta);
  const rollouts = await readStageFile(layout.stepFile(step, "rollouts"), "rollouts");
  const scored = await timed("score", () =>
    score(rollouts, {
      config: config.score,
      sandbox: {
        kind: config.rollout.tools.sandbox,
        unsafeNoSandbox: config.rollout.tools.unsafe_no_sandbox,
      },
      configHash: ctx.configHash,
    }));
  await writeTable(layout.stepFile(step, "scored"), "scored", scored.table);
  const masked = await timed(
    "mask",
    async () =>
      mask(await readStageFile(layout.stepFile(step, "scored"), "scored"), {
        config: config.mask,
        configHash: ctx.configHash,
      }),
  );
  await writeTable(layout.stepFile(step, "batch"), "batch", masked.table);
  const batch = await readStageFile(layout.stepFile(step, "batch"), "batch");
  const previous = step > 1 ? layout.adapter(step - 1) : config.model.adapter;
  const trained = await timed("train", () =>
    train(batch, {
      ...trainOptionsOf(
        { ...config, model: { ...config.model, adapter: previous } },
        ctx.configHash,
        layout.adapter(step),
      ),
      overwrite: true, // a step redone after a kill replaces its own half-finished outputs
    }));
  await copyStageFile(`${layout.adapter(step)}/metrics.arrow`, layout.stepFile(step, "metrics"));
  await policy.setAdapter(layout.adapter(step));
  const rewards = scored.table.getChild("reward")!.toArray() as Float32Array;
  const row = stepMetricsRow({
    step,
    episodes: out.episodes,
    rewards,
    score: scored.summary,
    mask: masked.summary,
    train: trained.metrics,
    seconds,
  });
  ctx.rows.push(row);
  await writeRunMetrics(layout, ctx.rows, config, ctx.configHash);
  console.log(stepLine(row, config.loop.steps));
}

/** Evaluates the current policy on the held-out split into eval/step-NNNN.arrow. */
async function evalStep(ctx: RunContext, step: number): Promise<string> {
  const { config, layout, policy } = ctx;
  const result = await evaluate(policy, ctx.tokenizer, ctx.heldOut, config, ctx.tools, {
    step,
    showProgress: ctx.show,
  });
  await Deno.mkdir(dirname(layout.eval(step)), { recursive: true });
  await writeStageFile(layout.eval(step), "eval", result.columns, {
    config_hash: ctx.configHash,
    model: config.model.path,
    adapter: await policy.adapterId(),
    sampling: { temperature: config.eval.temperature, samples: config.eval.samples },
    seed: config.eval.seed,
  });
  const line = `${evalSummaryLine(result.summary)} at step ${step}`;
  console.log(line);
  return line;
}

function isEvalStep(config: Config, step: number): boolean {
  const every = config.loop.eval_every;
  return every > 0 && (step % every === 0 || step === config.loop.steps);
}

/** Drops the adapter of `step` unless `loop.save_every` keeps it (the latest one is always kept). */
async function pruneAdapter(ctx: RunContext, step: number): Promise<void> {
  const every = ctx.config.loop.save_every;
  if (step < 1 || (every > 0 && step % every === 0)) return;
  await Deno.remove(ctx.layout.adapter(step), { recursive: true }).catch(() => {});
}

/** Copies a stage file and its manifest (the manifest last). */
async function copyStageFile(from: string, to: string): Promise<void> {
  await copyFile(from, to);
  await copyFile(`${from}.manifest.json`, `${to}.manifest.json`);
}
