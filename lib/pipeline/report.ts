/**
 * The report stage: a run directory's files rendered as one self-contained HTML page (charts per step,
 * eval points, trajectories; lib/report/), or several runs on one comparison page. It reads only the
 * runs' files, so it needs no session.
 *
 * @module
 */

import { renderComparison, renderReport } from "../report/mod.ts";
import type { PageOutput } from "./output.ts";

/** The report page of the run directory `run`. */
export async function report(run: string): Promise<PageOutput> {
  return { kind: "page", html: await renderReport(run), summary: { run } };
}

/** One page comparing the runs in `runs` (lib/report/compare.ts). */
export async function compareReport(runs: readonly string[]): Promise<PageOutput> {
  return { kind: "page", html: await renderComparison(runs), summary: { run: runs.join(", ") } };
}
