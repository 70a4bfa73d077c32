/**
 * The loop: N steps of rollout → score → mask → train in one run directory (layout.ts): the pipeline's
 * stage functions called in this process with one Session for the whole run, so the policy, the tools
 * and the trainer with its train graph are opened once; the trainer's adapter continues in memory from
 * step to step, and the policy switches to each step's checkpoint.
 *
 * Step s (1-based) samples the tasks of `tasksForStep(train split, s)` with seeds from (run seed, s,
 * task, sample), writes `step-s/{rollouts,scored,batch,metrics}.arrow`, trains the adapter of step s − 1
 * (none at step 1: `model.adapter` or a fresh one) into `adapters/step-s/`, appends its row to
 * `metrics.arrow`, evaluates on the held-out split every `loop.eval_every` steps (and before step 1),
 * and writes `latest` last. With `loop.filter_groups.enable` the step samples DAPO's way (sample_step.ts):
 * more batches of tasks until it holds `tasks_per_step` groups whose rewards differ, or the cap. A step killed halfway is redone whole on `--resume`, from the adapter and
 * optimizer state `latest` names, so a resumed run repeats an uninterrupted one.
 *
 * @module
 */

import { copyFile } from "node:fs/promises";
import { dirname } from "node:path";
import { readStageFile } from "../arrow/read.ts";
import { writeTextAtomic } from "../fs/atomic.ts";
import type { Config } from "../config/schema.ts";
import { requireHeldOut } from "../rollout/tasks.ts";
import { progress } from "../progress.ts";
import {
  evalSummaryLine,
  evaluate,
  mask,
  openSession,
  report,
  type Session,
  train,
  writeStageOutput,
} from "../pipeline/mod.ts";
import { RunLayout, stepName } from "./layout.ts";
import { acquireRunLock } from "./lock.ts";
import { completedSteps, keepRows, writeRunMetrics } from "./run_files.ts";
import { checkResumable, writeSnapshot } from "./snapshot.ts";
import { stepLine, stepMetricsRow } from "./step_metrics.ts";
import { zeroVarianceWarning } from "../mask/mask_table.ts";
import { filterLine, filterMetrics } from "./filter_groups.ts";
import { sampleStep, type Timed } from "./sample_step.ts";

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

/** The run: its session (everything opened once), its directory, and the metrics rows so far. */
interface RunContext {
  session: Session;
  layout: RunLayout;
  rows: Record<string, number>[];
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
  let session: Session | null = null;
  try {
    const done = o.resume ? await completedSteps(layout) : 0;
    if (o.resume) await checkResumable(layout, config);
    await writeSnapshot(layout, config);
    const adapter = done > 0 ? layout.adapter(done) : config.model.adapter;
    session = openSession(config, configHash, {
      adapter,
      showProgress: o.showProgress,
      judgeCacheDir: layout.judgeCache,
    });
    const ctx: RunContext = { session, layout, rows: await keepRows(layout, done) };
    const evals = new Map<number, string>();
    if (done === 0 && config.loop.eval_every > 0) evals.set(0, await evalStep(ctx, 0));
    for (let step = done + 1; step <= config.loop.steps; step++) {
      await runStep(ctx, step);
      if (isEvalStep(config, step)) evals.set(step, await evalStep(ctx, step));
      await writeTextAtomic(layout.latest, `${stepName(step)}\n`); // last: the step is complete
      await pruneAdapter(ctx, step - 1);
    }
    await writeStageOutput(layout.report, await report(layout.dir));
    if (session.showProgress) progress.log(`loop: report ${layout.report}`);
    return { dir: layout.dir, step: Math.max(done, config.loop.steps), evals };
  } finally {
    await session?.close();
    await release();
  }
}

/**
 * One step: rollout → score → mask → train, each stage's file written as it is made and read back (so
 * the next stage sees exactly the file a stage command would read); the policy then samples with the
 * step's adapter.
 */
async function runStep(ctx: RunContext, step: number): Promise<void> {
  const { session, layout } = ctx;
  const { config } = session;
  await Deno.mkdir(layout.stepDir(step), { recursive: true });
  const seconds = { rollout: 0, score: 0, mask: 0, train: 0 };
  const timed: Timed = async (stage, f) => {
    const started = performance.now();
    const value = await f();
    seconds[stage] += (performance.now() - started) / 1000; // dynamic sampling rolls out and scores again
    return value;
  };
  const sampled = await sampleStep(session, layout, step, timed);
  const scoredFile = sampled.scored;
  const masked = await timed("mask", () => mask(session, scoredFile, { step }));
  await writeStageOutput(layout.stepFile(step, "batch"), masked);
  const batch = await readStageFile(layout.stepFile(step, "batch"), "batch");
  const trained = await timed("train", () => train(session, batch, { step }));
  // A step redone after a kill replaces its own half-finished checkpoint (the run is ours, locked).
  await writeStageOutput(layout.adapter(step), trained);
  await copyStageFile(`${layout.adapter(step)}/metrics.arrow`, layout.stepFile(step, "metrics"));
  await session.useAdapter(layout.adapter(step));
  const rewards = scoredFile.vector("reward").toArray() as Float32Array;
  const row = stepMetricsRow({
    step,
    episodes: sampled.episodes,
    rewards,
    score: sampled.summary,
    mask: masked.summary,
    train: trained.summary.metrics,
    seconds,
  });
  if (sampled.filter) Object.assign(row, filterMetrics(sampled.filter));
  ctx.rows.push(row);
  await writeRunMetrics(layout, ctx.rows, config, session.configHash);
  console.log(stepLine(row, config.loop.steps));
  if (sampled.filter) {
    const { metric, max_num_gen_batches } = config.loop.filter_groups;
    console.error(filterLine(step, sampled.filter, metric, max_num_gen_batches));
  }
  const warning = zeroVarianceWarning(masked.summary, rewards);
  if (warning) console.error(`step ${step}: ${warning}`);
}

/** Evaluates the current policy on the held-out split into eval/step-NNNN.arrow. */
async function evalStep(ctx: RunContext, step: number): Promise<string> {
  const out = await evaluate(ctx.session, { step });
  await Deno.mkdir(dirname(ctx.layout.eval(step)), { recursive: true });
  await writeStageOutput(ctx.layout.eval(step), out);
  const line = `${evalSummaryLine(out.summary)} at step ${step}`;
  console.log(line);
  return line;
}

function isEvalStep(config: Config, step: number): boolean {
  const every = config.loop.eval_every;
  return every > 0 && (step % every === 0 || step === config.loop.steps);
}

/** Drops the adapter of `step` unless `loop.save_every` keeps it (the latest one is always kept). */
async function pruneAdapter(ctx: RunContext, step: number): Promise<void> {
  const every = ctx.session.config.loop.save_every;
  if (step < 1 || (every > 0 && step % every === 0)) return;
  await Deno.remove(ctx.layout.adapter(step), { recursive: true }).catch(() => {});
}

/** Copies a stage file and its manifest (the manifest last). */
async function copyStageFile(from: string, to: string): Promise<void> {
  await copyFile(from, to);
  await copyFile(`${from}.manifest.json`, `${to}.manifest.json`);
}
