/**
 * `renderComparison(runDirs)`: several runs on one self-contained HTML page (`deno task report RUN_A
 * RUN_B … --out page.html`), each chart one line per run: held-out accuracy and tool-use rate at every
 * eval, and per training step the mean reward, tool calls per episode and the tool calls' success rate.
 * A table gives each run's first and last eval.
 *
 * Runs are labelled by their path below the runs' common parent (`grpo/seed-1`). When labels share a
 * first part (`grpo/…`, `ppo/…`) and a part holds two or more runs, the page opens with the same charts
 * per part: the mean over its runs at each step where all of them have a value, so that an algorithm
 * compared over several seeds reads as one line.
 *
 * As the single-run report: no scripts, no network references, a Content-Security-Policy forbidding both.
 *
 * @module
 */

import { relative, resolve, sep } from "node:path";
import { HTML_MARKER } from "../fs/output.ts";
import { escapeHtml, formatNumber } from "./html.ts";
import { loadRunData, type RunData } from "./run_data.ts";
import { PAGE_STYLE } from "./style.ts";
import { lineChart, type Series } from "./svg_chart.ts";

/** One run's curves: held-out evals and per-step training metrics. */
export interface RunCurves {
  label: string;
  evalSteps: number[];
  heldOutAccuracy: number[];
  heldOutToolUse: number[];
  steps: number[];
  rewardMean: number[];
  toolCallsPerEpisode: number[];
  /** 1 − tool_failure_rate where the step made tool calls (NaN where it made none). */
  toolSuccess: number[];
}

/** Labels of `dirs`: their paths below the common parent (their names when that is empty). */
export function runLabels(dirs: readonly string[]): string[] {
  const parts = dirs.map((d) => resolve(d).split(sep));
  let common = 0;
  while (parts.every((p) => p.length > common + 1 && p[common] === parts[0][common])) common++;
  return dirs.map((d, i) => relative(parts[i].slice(0, common).join(sep) || sep, resolve(d)) || d);
}

/** The curves the page draws, from a run's data. */
export function curvesOf(run: RunData, label: string): RunCurves {
  const col = (name: string) => run.metrics?.columns.get(name) ?? [];
  const calls = col("tool_calls_per_episode"), failures = col("tool_failure_rate");
  return {
    label,
    evalSteps: run.evals.map((e) => e.step),
    heldOutAccuracy: run.evals.map((e) => e.accuracy),
    heldOutToolUse: run.evals.map((e) => e.toolUseRate),
    steps: run.metrics?.steps ?? [],
    rewardMean: col("reward_mean"),
    toolCallsPerEpisode: calls,
    toolSuccess: failures.map((f, i) => (calls[i] > 0 ? 1 - f : NaN)),
  };
}

/** Mean curves over `runs` (a step counts where every run has a finite value). */
export function meanCurves(label: string, runs: readonly RunCurves[]): RunCurves {
  const mean = (x: (r: RunCurves) => number[], at: (r: RunCurves) => number[], steps: number[]) =>
    steps.map((s) => {
      const v = runs.map((r) => x(r)[at(r).indexOf(s)]);
      return v.every(Number.isFinite) ? v.reduce((a, b) => a + b, 0) / v.length : NaN;
    });
  const shared = (at: (r: RunCurves) => number[]) =>
    at(runs[0]).filter((s) => runs.every((r) => at(r).includes(s)));
  const evalSteps = shared((r) => r.evalSteps), steps = shared((r) => r.steps);
  return {
    label,
    evalSteps,
    heldOutAccuracy: mean((r) => r.heldOutAccuracy, (r) => r.evalSteps, evalSteps),
    heldOutToolUse: mean((r) => r.heldOutToolUse, (r) => r.evalSteps, evalSteps),
    steps,
    rewardMean: mean((r) => r.rewardMean, (r) => r.steps, steps),
    toolCallsPerEpisode: mean((r) => r.toolCallsPerEpisode, (r) => r.steps, steps),
    toolSuccess: mean((r) => r.toolSuccess, (r) => r.steps, steps),
  };
}

/** The groups of `curves` by the first part of their labels, only where a part holds two or more runs. */
export function groupsOf(curves: readonly RunCurves[]): RunCurves[] {
  const groups = new Map<string, RunCurves[]>();
  for (const c of curves) {
    const [head, ...rest] = c.label.split(/[\\/]/);
    if (rest.length === 0) continue;
    groups.set(head, [...(groups.get(head) ?? []), c]);
  }
  const kept = [...groups].filter(([, members]) => members.length >= 2);
  return kept.length >= 2 || (kept.length === 1 && kept[0][1].length < curves.length)
    ? kept.map(([name, members]) => meanCurves(`${name} (mean of ${members.length})`, members))
    : [];
}

/** One chart per curve, one line per run. */
function charts(curves: readonly RunCurves[], id: string): string {
  const line = (
    name: string,
    title: string,
    x: (c: RunCurves) => number[],
    y: (c: RunCurves) => number[],
    unit?: boolean,
  ) =>
    lineChart(curves.map((c): Series => ({ name: c.label, x: x(c), y: y(c) })), {
      id: `${id}-${name}`,
      title,
      ...(unit ? { yDomain: [0, 1] as [number, number] } : {}),
    });
  return `<div class="charts">${
    [
      line("heldout_accuracy", "Held-out accuracy (step 0 = before training)", (c) =>
        c.evalSteps, (c) =>
        c.heldOutAccuracy, true),
      line("heldout_tool_use", "Held-out tool-use rate", (c) =>
        c.evalSteps, (c) =>
        c.heldOutToolUse, true),
      line("reward", "Training reward (mean per step)", (c) =>
        c.steps, (c) => c.rewardMean),
      line(
        "tool_success",
        "Tool calls that succeeded (training)",
        (c) => c.steps,
        (c) => c.toolSuccess,
        true,
      ),
      line("tool_calls", "Tool calls per episode (training)", (c) => c.steps, (c) => c.toolCallsPerEpisode),
    ].join("")
  }</div>`;
}

function table(curves: readonly RunCurves[]): string {
  const first = (v: number[]) => v[0], last = (v: number[]) => v[v.length - 1];
  const rows = curves.map((c) =>
    `<tr><td>${escapeHtml(c.label)}</td><td>${c.steps.length}</td>` +
    `<td>${formatNumber(first(c.heldOutAccuracy))} → ${formatNumber(last(c.heldOutAccuracy))}</td>` +
    `<td>${formatNumber(first(c.heldOutToolUse))} → ${formatNumber(last(c.heldOutToolUse))}</td>` +
    `<td>${formatNumber(last(c.toolSuccess))}</td></tr>`
  );
  return `<table class="summary"><thead><tr><th>run</th><th>steps</th><th>held-out accuracy</th>` +
    `<th>held-out tool use</th><th>tool success, last step</th></tr></thead><tbody>${
      rows.join("")
    }</tbody></table>`;
}

/** The comparison page of the runs in `runDirs` (each a run directory; see the module doc). */
export async function renderComparison(runDirs: readonly string[]): Promise<string> {
  const labels = runLabels(runDirs);
  const curves: RunCurves[] = [];
  for (const [i, dir] of runDirs.entries()) curves.push(curvesOf(await loadRunData(dir), labels[i]));
  const groups = groupsOf(curves);
  const title = `Comparison of ${curves.length} runs`;
  const sections = [
    `<h1>${escapeHtml(title)}</h1><dl class="facts">${
      runDirs.map((d, i) => `<dt>${escapeHtml(labels[i])}</dt><dd>${escapeHtml(resolve(d))}</dd>`).join("")
    }</dl>`,
    ...(groups.length
      ? [`<h2>Mean over each group's runs</h2>${charts(groups, "group")}${table(groups)}`]
      : []),
    `<h2>Every run</h2>${charts(curves, "run")}${table(curves)}`,
  ];
  return `<!DOCTYPE html>${HTML_MARKER}<html lang="en"><head><meta charset="utf-8">` +
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${escapeHtml(title)}</title><style>${PAGE_STYLE}</style></head>` +
    `<body>${sections.join("\n")}</body></html>\n`;
}
