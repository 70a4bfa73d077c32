/**
 * The report stage: a run directory's files rendered as one self-contained HTML page (charts per step,
 * eval points, trajectories; lib/report/). It reads only the run's files, so it needs no session.
 *
 * @module
 */

import { renderReport } from "../report/mod.ts";
import type { PageOutput } from "./output.ts";

/** The report page of the run directory `run`. */
export async function report(run: string): Promise<PageOutput> {
  return { kind: "page", html: await renderReport(run), summary: { run } };
}
