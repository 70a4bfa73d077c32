/**
 * `renderReport(runDir)`: one self-contained HTML page about a run — per-step charts (reward,
 * accuracy, KL, clip fraction, entropy, response length, turns, tool-call statuses, time per stage),
 * held-out eval points, and a few trajectories of the last complete step rendered as chat with each
 * sampled token coloured by its advantage.
 *
 * The page has no scripts, no network references and a Content-Security-Policy that forbids both,
 * so even if model output slipped past escaping it could not run or fetch anything.
 *
 * @module
 */

import type { StageFile } from "../arrow/stage_file.ts";
import { UserError } from "../errors.ts";
import { loadTokenizer } from "../model/tokenizer.ts";
import { escapeHtml, formatNumber } from "./html.ts";
import { type EvalPoint, loadRunData, type RunData, type RunMetrics } from "./run_data.ts";
import { lineChart, type Series, stackedBarChart } from "./svg_chart.ts";
import { type Decode, renderTrajectory } from "./trajectory.ts";
import { PAGE_STYLE } from "./style.ts";
import { HTML_MARKER } from "../fs/output.ts";

export interface ReportOptions {
  /** How to turn token ids into text; default the tokenizer of the run's `model.path`, null = none. */
  decode?: Decode | null;
}

/** The report of the run in `runDir` as one HTML document. */
export async function renderReport(runDir: string, opts: ReportOptions = {}): Promise<string> {
  const run = await loadRunData(runDir);
  const decode = opts.decode !== undefined ? opts.decode : await tokenizerDecode(run.modelPath);
  const sections = [
    header(run),
    summary(run.metrics),
    `<h2>Training, per step</h2><div class="charts">${metricCharts(run.metrics)}</div>`,
    `<h2>Held-out eval</h2>${evalSection(run.evals)}`,
    `<h2>Trajectories${run.lastStep ? ` of ${escapeHtml(run.lastStep.name)}` : ""}</h2>${
      trajectories(run, decode)
    }`,
  ];
  return `<!DOCTYPE html>${HTML_MARKER}<html lang="en"><head><meta charset="utf-8">` +
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1">` +
    `<title>${escapeHtml(`Run ${run.name}`)}</title><style>${PAGE_STYLE}</style></head>` +
    `<body>${sections.join("\n")}</body></html>\n`;
}

/** The decoder of the tokenizer in `modelPath`, or null when that directory has no tokenizer. */
async function tokenizerDecode(modelPath: string | null): Promise<Decode | null> {
  if (!modelPath) return null;
  try {
    const tokenizer = await loadTokenizer(modelPath);
    return (ids) => tokenizer.decode(ids);
  } catch (e) {
    if (e instanceof UserError) return null; // gone or incomplete: fall back to the messages text
    throw e;
  }
}

function header(run: RunData): string {
  const facts = [
    ["run directory", run.dir],
    ["last complete step", run.latest ?? "none yet"],
    ["model", run.modelPath ?? "unknown (no config.yaml)"],
  ];
  return `<h1>${escapeHtml(`Run ${run.name}`)}</h1><dl class="facts">${
    facts.map(([k, v]) => `<dt>${escapeHtml(k)}</dt><dd>${escapeHtml(v)}</dd>`).join("")
  }</dl>`;
}

const SUMMARY_COLUMNS = [
  "reward_mean",
  "accuracy",
  "tool_calls_per_episode",
  "tool_failure_rate",
  "kl",
  "lr",
];

/** The first and last step's values of the headline metrics. */
function summary(metrics: RunMetrics | null): string {
  if (!metrics || metrics.steps.length === 0) {
    return `<p class="note">no metrics.arrow yet: no step has completed</p>`;
  }
  const last = metrics.steps.length - 1;
  const rows = SUMMARY_COLUMNS.filter((c) => metrics.columns.has(c)).map((c) => {
    const v = metrics.columns.get(c)!;
    return `<tr><th>${escapeHtml(c)}</th><td>${formatNumber(v[0])}</td><td>${
      formatNumber(v[last])
    }</td></tr>`;
  });
  return `<table class="summary"><thead><tr><th></th><th>step ${metrics.steps[0]}</th>` +
    `<th>step ${metrics.steps[last]}</th></tr></thead><tbody>${rows.join("")}</tbody></table>`;
}

/** Line charts of single metrics, then the stacked tool-status and timing charts. */
function metricCharts(metrics: RunMetrics | null): string {
  if (!metrics) return "";
  const x = metrics.steps;
  const series = (names: string[]): Series[] =>
    names.filter((n) => metrics.columns.has(n)).map((n) => ({ name: n, x, y: metrics.columns.get(n)! }));
  const line = (id: string, title: string, names: string[], yDomain?: [number, number]) =>
    lineChart(series(names), { id, title, yDomain });
  const stacked = (id: string, title: string, prefix: string) => {
    const names = [...metrics.columns.keys()].filter((n) => n.startsWith(prefix)).sort();
    const stacks = names.map((n) => ({ name: n.slice(prefix.length), values: metrics.columns.get(n)! }));
    return stackedBarChart(x, stacks, { id, title });
  };
  return [
    line("reward", "Reward (mean and std)", ["reward_mean", "reward_std"]),
    line("accuracy", "Accuracy (training episodes)", ["accuracy"], [0, 1]),
    line("kl", "KL to the reference", ["kl"]),
    line("clip_frac", "Clip fraction", ["clip_frac"]),
    line("entropy", "Entropy", ["entropy"]),
    line("response_tokens", "Response length (sampled tokens)", ["response_tokens_mean"]),
    line("turns", "Turns and tool calls per episode", ["turns_mean", "tool_calls_per_episode"]),
    stacked("tool_status", "Tool calls by status", "tool_status_"),
    line("zero_std", "Groups with zero reward spread", ["frac_zero_std_groups"], [0, 1]),
    line("loss", "Loss", ["loss", "pg_loss"]),
    line("rollout_mismatch", "Sampler–trainer mismatch (train.loss.rollout_is)", [
      "rollout_logprob_diff",
      "rollout_kl",
      "rollout_is_clip_frac",
    ]),
    stacked("seconds", "Seconds per stage", "seconds_"),
  ].join("");
}

function evalSection(evals: EvalPoint[]): string {
  if (evals.length === 0) return `<p class="note">no eval files (eval/step-NNNN.arrow) in this run</p>`;
  const x = evals.map((e) => e.step);
  const chart = lineChart([
    { name: "accuracy", x, y: evals.map((e) => e.accuracy) },
    { name: "tool-use rate", x, y: evals.map((e) => e.toolUseRate) },
  ], {
    id: "eval",
    title: "Held-out accuracy and tool-use rate (step 0 = before training)",
    yDomain: [0, 1],
  });
  const rows = evals.map((e) =>
    `<tr><td>${e.step}</td><td>${e.episodes}</td><td>${formatNumber(e.accuracy)}</td>` +
    `<td>${formatNumber(e.toolUseRate)}</td><td>${formatNumber(e.rewardMean)}</td></tr>`
  );
  return `<div class="charts">${chart}</div><table class="eval"><thead><tr><th>step</th><th>episodes</th>` +
    `<th>accuracy</th><th>tool-use rate</th><th>mean reward</th></tr></thead><tbody>${
      rows.join("")
    }</tbody></table>`;
}

/** Best and worst reward of the last step, and one with a failed tool call when there is one. */
function trajectories(run: RunData, decode: Decode | null): string {
  const file = run.lastStep?.file;
  if (!file || file.rows === 0) return `<p class="note">no completed step yet</p>`;
  const picks: Array<[number, string]> = [];
  const add = (row: number | undefined, title: string) => {
    if (row !== undefined && row >= 0 && !picks.some(([r]) => r === row)) picks.push([row, title]);
  };
  if (file.has("reward")) {
    // Ties in reward are broken by the advantage, so the picks show coloured tokens when any exist.
    const key = file.column("reward").map((r, i) => Number(r) + 1e-6 * advantageSum(file, i));
    add(key.indexOf(Math.max(...key)), "Best reward");
    add(key.indexOf(Math.min(...key)), "Worst reward");
  } else {
    add(0, "First episode");
  }
  const calls = file.column("tool_calls") as Array<Array<{ status: string }>>;
  add(calls.findIndex((c) => c.some((call) => call.status !== "ok")), "A failed tool call");
  const legend = `<p class="legend-adv">Sampled tokens are coloured by their advantage: ` +
    `<span class="tok" style="background:rgba(0, 90, 255, 0.6)">positive</span> ` +
    `<span class="tok" style="background:rgba(220, 40, 40, 0.6)">negative</span>; ` +
    `hover a token for its id and value.</p>`;
  return legend + picks.map(([row, title]) => renderTrajectory(file, row, title, decode)).join("");
}

function advantageSum(file: StageFile, row: number): number {
  return file.has("advantages") ? file.listAt<Float32Array>("advantages", row).reduce((a, b) => a + b, 0) : 0;
}
