/**
 * The bench's results: `results-<start>.json` (every measurement) and `results-<start>.md` (the tables to
 * paste into BENCH.md), both rewritten whole after each section, so that a run stopped before its end (a
 * borrowed GPU machine's time limit, a killed process) leaves what it had measured.
 *
 * @module
 */

import { join } from "node:path";
import { writeTextAtomic } from "../lib/fs/atomic.ts";
import { algorithmsTables, engineTables, loopTables, trainTables, weightsTables } from "./report.ts";
import { gpuTables } from "./gpu.ts";
import { demoSeedsTable } from "./demo_seeds.ts";
import type { BenchSection } from "./only.ts";
import { beforeAfterTables, type Round } from "./before_after.ts";

/** What the tables are made for: the models of the run, the `--before` revision, the sections asked for. */
export interface ResultsPlan {
  models: string[];
  gpuModels: string[];
  before?: string;
  want(section: BenchSection): boolean;
}

/** The Markdown of `results`: a heading, the machine, then each section's tables. */
export function resultsMarkdown(results: Record<string, unknown>, plan: ResultsPlan): string {
  return [
    `## ${results.command} — ${String(results.date).slice(0, 10)}`,
    "",
    ...(results.machine as string[]).map((l) => `- ${l}`),
    "",
    ...plan.models.flatMap((name) => [
      ...(results[`engine:${name}`] ? engineTables(name, results[`engine:${name}`] as never) : []),
      ...(results[`train:${name}`] ? trainTables(name, results[`train:${name}`] as never) : []),
      ...(results[`before_after:${name}`]
        ? beforeAfterTables(name, plan.before!, results[`before_after:${name}`] as Round[])
        : []),
      ...(results[`weights:${name}`] ? weightsTables(name, results[`weights:${name}`] as never) : []),
    ]),
    ...plan.models.flatMap((name) =>
      results[`rollout:${name}`]
        ? [
          "",
          `Rollout vs raw generate, ${name} (bench/rollout_bench.ts): ${
            JSON.stringify(results[`rollout:${name}`])
          }`,
        ]
        : []
    ),
    ...(results.loop
      ? loopTables(
        (results.loop as never as { loop: never }).loop,
        (results.loop as never as { peer: never }).peer,
      )
      : []),
    ...(results.score_mask
      ? ["", `Score + mask (bench/score_mask_bench.ts): ${JSON.stringify(results.score_mask)}`]
      : []),
    ...(results.algorithms ? ["", ...algorithmsTables(results.algorithms as never)] : []),
    ...(results.demo_seeds ? ["", ...demoSeedsTable(results.demo_seeds as never)] : []),
    ...(results.agent_seeds ? ["", ...demoSeedsTable(results.agent_seeds as never)] : []),
    ...(plan.want("gpu")
      ? plan.gpuModels.flatMap((name) => gpuTables(name, results[`gpu:${name}`] as never))
      : []),
  ].join("\n");
}

/** The two results files of one run, named by its start. */
export class ResultsFiles {
  readonly json: string;
  readonly md: string;

  constructor(
    out: string,
    readonly started: Date,
    readonly results: Record<string, unknown>,
    readonly plan: ResultsPlan,
  ) {
    const stamp = started.toISOString().replace(/[:.]/g, "-");
    this.json = join(out, `results-${stamp}.json`);
    this.md = join(out, `results-${stamp}.md`);
  }

  /**
   * Sets `results[key]` and rewrites both files; says on stderr how long after the start (on a machine
   * lent for a time limit, the output's tail then tells where the time went).
   */
  async record(key: string, value: unknown): Promise<void> {
    this.results[key] = value;
    await this.save();
    console.error(`saved ${key} at ${Math.round((Date.now() - this.started.getTime()) / 1000)} s`);
  }

  /** Rewrites both files from the results so far; returns the Markdown. */
  async save(): Promise<string> {
    const md = resultsMarkdown(this.results, this.plan);
    await writeTextAtomic(this.json, JSON.stringify(this.results, null, 2));
    await writeTextAtomic(this.md, md + "\n");
    return md;
  }
}
