/**
 * A loop step's sampling: rollout → score, each file written as it is made and read back. Without
 * `loop.filter_groups` one batch of the step's tasks; with it, DAPO's dynamic sampling (filter_groups.ts):
 * generation batches in `step-NNNN/gen-GG/`, until the step holds `rollout.tasks_per_step` groups whose
 * metric varies or the cap is reached, and the kept groups' rows as the step's rollouts.arrow and
 * scored.arrow (so `deno task mask --in scored.arrow` makes the step's batch.arrow, as without filtering).
 *
 * @module
 */

import { dirname, join } from "node:path";
import { rolloutFileBytes } from "../arrow/estimate.ts";
import { mergeStageFiles } from "../arrow/merge.ts";
import { readStageFile } from "../arrow/read.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import { writeTable } from "../arrow/stage_io.ts";
import type { Task } from "../data/task.ts";
import { UserError } from "../errors.ts";
import { checkFreeSpace } from "../fs/disk_space.ts";
import { rollout, score, type ScoreSummary, type Session, writeStageOutput } from "../pipeline/mod.ts";
import type { Episode } from "../rollout/rollout.ts";
import { tasksForStep } from "../rollout/tasks.ts";
import {
  drawOrder,
  type FilterRecord,
  genBatch,
  groupsWithSpread,
  rowsOfGroups,
  scoreSummaryOf,
} from "./filter_groups.ts";
import type { RunLayout } from "./layout.ts";
import type { StageSeconds } from "./step_metrics.ts";

/** Runs `f`, adding its wall time to the stage's seconds. */
export type Timed = <T>(stage: keyof StageSeconds, f: () => Promise<T> | T) => Promise<T>;

/** What a step sampled for training: the episodes, the scored file read back, and its summary. */
export interface SampledStep {
  episodes: Episode[];
  scored: StageFile;
  summary: ScoreSummary;
  /** Dynamic sampling's record (loop.filter_groups.enable only). */
  filter?: FilterRecord;
}

/** The step's sampling: one batch, or dynamic sampling when `loop.filter_groups.enable`. */
export function sampleStep(
  session: Session,
  layout: RunLayout,
  step: number,
  timed: Timed,
): Promise<SampledStep> {
  return session.config.loop.filter_groups.enable
    ? sampleFiltered(session, layout, step, timed)
    : sampleOnce(session, layout, step, timed);
}

/** The step's tasks, sampled and scored once into `step-NNNN/{rollouts,scored}.arrow`. */
async function sampleOnce(
  session: Session,
  layout: RunLayout,
  step: number,
  timed: Timed,
): Promise<SampledStep> {
  const { config } = session;
  const tasks = tasksForStep((await session.tasks()).train, step, config.rollout.tasks_per_step);
  // Room for the step's rollouts, scored and batch files, before any episode is sampled.
  checkFreeSpace(layout.stepDir(step), 3 * rolloutFileBytes(config, tasks, "batch"));
  const got = await rollAndScore(session, tasks, { step }, (file) => layout.stepFile(step, file), timed);
  return { episodes: got.episodes, scored: got.scored, summary: got.summary };
}

/**
 * `tasks` sampled and scored, each file written at `path(kind)` as it is made and read back (what later
 * stages read is what the files hold).
 */
async function rollAndScore(
  session: Session,
  tasks: readonly Task[],
  request: { step: number; groupIds?: readonly number[] },
  path: (file: "rollouts" | "scored") => string,
  timed: Timed,
): Promise<{ episodes: Episode[]; rollouts: StageFile; scored: StageFile; summary: ScoreSummary }> {
  const rolled = await timed("rollout", () => rollout(session, tasks, request));
  await writeStageOutput(path("rollouts"), rolled);
  const rollouts = await readStageFile(path("rollouts"), "rollouts");
  const scored = await timed("score", () => score(session, rollouts, { step: request.step }));
  await writeStageOutput(path("scored"), scored);
  const scoredFile = await readStageFile(path("scored"), "scored");
  return { episodes: rolled.episodes, rollouts, scored: scoredFile, summary: scored.summary };
}

/** One generation batch, sampled and scored into `step-NNNN/gen-GG/`, both files read back. */
async function sampleGenBatch(
  session: Session,
  layout: RunLayout,
  at: { step: number; batch: number; order: readonly Task[] },
  timed: Timed,
): Promise<{ episodes: Episode[]; rollouts: StageFile; scored: StageFile }> {
  const { config } = session;
  const { step, batch } = at;
  const { tasks, groupIds } = genBatch(at.order, batch, config.rollout.tasks_per_step);
  const path = (file: "rollouts" | "scored") => layout.genFile(step, batch, file);
  await Deno.mkdir(dirname(path("rollouts")), { recursive: true });
  // Room for this batch's two files and the step's kept copies and batch file.
  checkFreeSpace(layout.stepDir(step), 5 * rolloutFileBytes(config, tasks, "batch"));
  return await rollAndScore(session, tasks, { step, groupIds }, path, timed);
}

/** DAPO's dynamic sampling for one step (filter_groups.ts). */
async function sampleFiltered(
  session: Session,
  layout: RunLayout,
  step: number,
  timed: Timed,
): Promise<SampledStep> {
  const { config } = session;
  const wanted = config.rollout.tasks_per_step;
  const { metric, max_num_gen_batches: cap } = config.loop.filter_groups;
  const order = drawOrder((await session.tasks()).train, step, wanted, config.rollout.generation.seed);
  await removeGenBatches(layout, step);
  const parts: { rollouts: StageFile[]; scored: StageFile[]; episodes: Episode[] } = {
    rollouts: [],
    scored: [],
    episodes: [],
  };
  const kept: number[] = [];
  const r: FilterRecord = { kept: 0, wanted, batches: 0, drawn: 0, flat: 0, short: null };
  while (kept.length < wanted && r.batches < cap && r.batches * wanted < order.length) {
    r.batches++;
    const got = await sampleGenBatch(session, layout, { step, batch: r.batches, order }, timed);
    const spread = groupsWithSpread(got.scored, metric);
    kept.push(...spread.ids.slice(0, wanted - kept.length)); // surplus groups dropped in draw order, as verl
    r.drawn += spread.groups;
    r.flat += spread.groups - spread.ids.length;
    parts.rollouts.push(got.rollouts);
    parts.scored.push(got.scored);
    parts.episodes.push(...got.episodes);
    if (session.showProgress) {
      session.progress.log(
        `filter_groups: batch ${r.batches}: ${spread.ids.length}/${spread.groups} groups vary, ` +
          `${kept.length}/${wanted} kept`,
      );
    }
  }
  r.kept = kept.length;
  if (r.kept < wanted) r.short = r.batches >= cap ? "cap" : "tasks";
  if (r.kept === 0) throw nothingKept(step, r, metric);
  const keep = new Set(kept);
  const scored = await writeKept(layout, step, parts, keep);
  return {
    episodes: parts.episodes.filter((e) => keep.has(e.groupId)),
    scored,
    summary: scoreSummaryOf(scored),
    filter: r,
  };
}

/** The kept groups' rows of every generation batch as the step's rollouts and scored files; scored read back. */
async function writeKept(
  layout: RunLayout,
  step: number,
  parts: { rollouts: StageFile[]; scored: StageFile[] },
  keep: ReadonlySet<number>,
): Promise<StageFile> {
  for (const kind of ["rollouts", "scored"] as const) {
    await writeTable(layout.stepFile(step, kind), kind, rowsOfGroups(mergeStageFiles(parts[kind]), keep));
  }
  return await readStageFile(layout.stepFile(step, "scored"), "scored");
}

/**
 * Removes the generation batches a killed attempt at the step left (the step is redone whole; a resume with
 * another `max_num_gen_batches` could otherwise leave batches this attempt does not draw).
 */
async function removeGenBatches(layout: RunLayout, step: number): Promise<void> {
  const dir = layout.stepDir(step);
  for await (const entry of Deno.readDir(dir)) {
    if (entry.isDirectory && /^gen-\d+$/.test(entry.name)) {
      await Deno.remove(join(dir, entry.name), { recursive: true });
    }
  }
}

/** The refusal of a step whose every sampled group had one value of the metric. */
function nothingKept(step: number, r: FilterRecord, metric: string): UserError {
  return new UserError(`loop step ${step}: loop.filter_groups`, {
    value: `${r.drawn} groups in ${r.batches} generation batches`,
    why: `in every group the episodes had equal ${metric}, so there is nothing to train on`,
    fix: "raise loop.filter_groups.max_num_gen_batches, use tasks that suit the model (some right, some " +
      "wrong), a larger rollout.group_size or a higher rollout.generation.temperature",
  });
}
