/**
 * What the report reads from a run directory (layout in docs/runs.md): the per-step metrics
 * (`metrics.arrow`, kind run_metrics), the eval files (`eval/step-NNNN.arrow`) and the last complete
 * step's episodes (`step-NNNN/batch.arrow`, else `scored.arrow`, else `rollouts.arrow`). Every part
 * may be missing: a run that has not finished a step, or one without eval, still gets a page.
 *
 * @module
 */

import { basename, dirname, join, resolve } from "node:path";
import { parse } from "@std/yaml";
import { readStageFile } from "../arrow/read.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import { UserError } from "../errors.ts";
import { readTextIfExists } from "../fs/read.ts";
import { findRunDirs, isRunDir } from "./find_runs.ts";

/** Per-step metrics as plain number arrays, one entry per loop step. */
export interface RunMetrics {
  steps: number[];
  columns: Map<string, number[]>;
}

/** One eval file summarized. */
export interface EvalPoint {
  step: number;
  episodes: number;
  accuracy: number;
  /** Fraction of episodes with a successful tool call. */
  toolUseRate: number;
  rewardMean: number;
}

/**
 * How a page names a run: its directory with the parent's name (`demo/run` for runs/demo/run, whose own
 * name, "run", says nothing), the same from any working directory.
 */
export function runName(dir: string): string {
  const abs = resolve(dir);
  return [basename(dirname(abs)), basename(abs)].filter((part) => part !== "").join("/");
}

/** The last complete step's episodes. */
export interface LastStep {
  name: string;
  file: StageFile;
}

export interface RunData {
  dir: string;
  name: string;
  /** `model.path` of the run's config snapshot (resolved against the working directory), if any. */
  modelPath: string | null;
  /** Content of `latest`, or null while no step has completed. */
  latest: string | null;
  metrics: RunMetrics | null;
  evals: EvalPoint[];
  lastStep: LastStep | null;
}

const STEP_DIR = /^step-(\d{4,})$/;
const EVAL_FILE = /^step-(\d{4,})\.arrow$/;

/** Reads what the report shows from the run directory `dir`. */
export async function loadRunData(dir: string): Promise<RunData> {
  await requireRunDir(dir);
  const latest = (await readTextIfExists(join(dir, "latest")))?.trim() || null;
  return {
    dir,
    name: runName(dir),
    modelPath: await modelPathOf(dir),
    latest,
    metrics: await readMetrics(dir),
    evals: await readEvals(dir),
    lastStep: await readLastStep(dir, latest),
  };
}

/**
 * Refuses anything but a run directory: a missing path, a file, or a directory without run files (then
 * naming the run directories found below it, e.g. `runs/demo/run` for `runs/demo`).
 */
export async function requireRunDir(dir: string): Promise<void> {
  const info = await Deno.stat(dir).catch(() => null);
  if (!info?.isDirectory) {
    throw new UserError(`run directory ${dir}`, {
      why: info ? "it is a file, not a directory" : "it does not exist",
      fix: "pass a run directory written by `deno task loop` (runs/<name>)",
    });
  }
  if (await isRunDir(dir)) return;
  const below = await findRunDirs(dir);
  throw new UserError(`run directory ${dir}`, {
    why: "it holds no run files (latest, metrics.arrow, step-NNNN/, eval/), so the report would be empty",
    fix: below.length
      ? `pass a run directory below it: ${below.join(", ")}`
      : "pass a run directory written by `deno task loop` or `deno task demo` (e.g. runs/loop, runs/demo/run)",
  });
}

async function modelPathOf(dir: string): Promise<string | null> {
  const text = await readTextIfExists(join(dir, "config.yaml"));
  if (text === null) return null;
  try {
    const path = (parse(text) as { model?: { path?: unknown } } | null)?.model?.path;
    return typeof path === "string" ? resolve(path) : null;
  } catch {
    return null; // the snapshot is only needed for decoding tokens; the messages text is the fallback
  }
}

async function readMetrics(dir: string): Promise<RunMetrics | null> {
  const path = join(dir, "metrics.arrow");
  if (!(await exists(path))) return null;
  const file = await readStageFile(path, "run_metrics");
  const columns = new Map<string, number[]>();
  for (const name of file.columnNames) {
    columns.set(name, Array.from(file.column(name), Number));
  }
  return { steps: columns.get("step") ?? [], columns };
}

async function readEvals(dir: string): Promise<EvalPoint[]> {
  const evalDir = join(dir, "eval");
  const names = await listNames(evalDir);
  const points: EvalPoint[] = [];
  for (const name of names) {
    const m = EVAL_FILE.exec(name);
    if (!m) continue;
    const file = await readStageFile(join(evalDir, name), "eval");
    const mean = (col: string) => {
      const values = file.column(col).map(Number);
      return values.length ? values.reduce((a, b) => a + b, 0) / values.length : NaN;
    };
    points.push({
      step: Number(m[1]),
      episodes: file.rows,
      accuracy: mean("correct"),
      toolUseRate: mean("used_tool"),
      rewardMean: mean("reward"),
    });
  }
  return points.sort((a, b) => a.step - b.step);
}

/** The step named by `latest`, else the highest-numbered step folder, read from its richest file. */
async function readLastStep(dir: string, latest: string | null): Promise<LastStep | null> {
  const steps = (await listNames(dir)).filter((n) => STEP_DIR.test(n)).sort();
  const name = latest && steps.includes(latest) ? latest : steps.at(-1);
  if (!name) return null;
  for (const kind of ["batch", "scored", "rollouts"] as const) {
    const path = join(dir, name, `${kind}.arrow`);
    if (await exists(path)) return { name, file: await readStageFile(path, kind) };
  }
  return null;
}

async function listNames(dir: string): Promise<string[]> {
  try {
    const names: string[] = [];
    for await (const entry of Deno.readDir(dir)) names.push(entry.name);
    return names.sort();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return [];
    throw e;
  }
}

async function exists(path: string): Promise<boolean> {
  return (await Deno.stat(path).catch(() => null)) !== null;
}
