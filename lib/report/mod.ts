/**
 * The run report: one self-contained HTML page from a run directory's files, and the pieces it is
 * made of (reusable from notebooks: the SVG charts and the run loader).
 *
 * ```ts
 * import { renderReport } from "./mod.ts";
 * await Deno.writeTextFile("report.html", await renderReport("runs/demo"));
 * ```
 *
 * @module
 */

export { renderReport, type ReportOptions } from "./page.ts";
export { renderComparison } from "./compare.ts";
export { type EvalPoint, loadRunData, requireRunDir, type RunData, type RunMetrics } from "./run_data.ts";
export {
  type ChartOptions,
  lineChart,
  PALETTE,
  type Series,
  type Stack,
  stackedBarChart,
} from "./svg_chart.ts";
export { advantageColor, type Decode, renderTrajectory } from "./trajectory.ts";
export { escapeHtml } from "./html.ts";
