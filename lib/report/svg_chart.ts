/**
 * Small inline SVG charts for the report and notebooks: line charts (one or more series over the
 * step) and stacked bar charts (counts per category per step). Output is a self-contained
 * `<figure>` string: no scripts, no external fonts or styles beyond what the page declares.
 *
 * Missing values (NaN) break a line instead of being drawn as 0; a series with one point is drawn as
 * a dot, so a run with a single step still shows its values.
 *
 * @module
 */

import { escapeHtml, formatNumber } from "./html.ts";

/** One line: y values at x positions (NaN = missing). */
export interface Series {
  name: string;
  x: readonly number[];
  y: readonly number[];
  color?: string;
}

/** One layer of a stacked bar chart: a value per x position. */
export interface Stack {
  name: string;
  values: readonly number[];
  color?: string;
}

export interface ChartOptions {
  /** Identifier in `data-chart` (tests and screenshots look charts up by it). */
  id: string;
  title: string;
  xLabel?: string;
  /** Fixed y range, e.g. [0, 1] for rates; default the data's range. */
  yDomain?: [number, number];
}

/** Colours that stay distinct for the colour-blind (Okabe–Ito). */
export const PALETTE = [
  "#0072b2",
  "#e69f00",
  "#009e73",
  "#d55e00",
  "#cc79a7",
  "#56b4e9",
  "#f0e442",
  "#000000",
];

const W = 360, H = 200;
const M = { left: 48, right: 12, top: 12, bottom: 32 };

/** A line chart of `series` over a shared x axis. */
export function lineChart(series: readonly Series[], opts: ChartOptions): string {
  const xs = series.flatMap((s) => s.x.filter(Number.isFinite));
  const ys = series.flatMap((s) => s.y.filter(Number.isFinite));
  if (ys.length === 0) return emptyChart(opts);
  const sx = scale(extent(xs), [M.left, W - M.right]);
  const yRange = opts.yDomain ?? padded(extent(ys));
  const sy = scale(yRange, [H - M.bottom, M.top]);
  const body = series.map((s, i) => {
    const color = s.color ?? PALETTE[i % PALETTE.length];
    const points = s.x.map((x, k) => [x, s.y[k]]).filter(([x, y]) =>
      Number.isFinite(x) && Number.isFinite(y)
    );
    const dots = points.map(([x, y]) =>
      `<circle cx="${r(sx(x))}" cy="${r(sy(y))}" r="2.5" fill="${color}"><title>${
        escapeHtml(`${s.name} at ${x}: ${formatNumber(y)}`)
      }</title></circle>`
    );
    return `<path d="${linePath(s, sx, sy)}" fill="none" stroke="${color}" stroke-width="1.8"/>${
      dots.join("")
    }`;
  });
  const legend = series.map((s, i) => ({ name: s.name, color: s.color ?? PALETTE[i % PALETTE.length] }));
  return figure(opts, axes(extent(xs), yRange, sx, sy, opts) + body.join(""), legend);
}

/** A stacked bar chart: at each x, the stacks' values piled in order. */
export function stackedBarChart(x: readonly number[], stacks: readonly Stack[], opts: ChartOptions): string {
  const totals = x.map((_, i) =>
    stacks.reduce((a, s) => a + (Number.isFinite(s.values[i]) ? s.values[i] : 0), 0)
  );
  if (x.length === 0 || stacks.length === 0) return emptyChart(opts);
  const xr = extent(x);
  const width = Math.max(4, (W - M.left - M.right) / (x.length + 1) * 0.7);
  const sx = scale([xr[0] - 0.5, xr[1] + 0.5], [M.left + width / 2, W - M.right - width / 2]);
  const yRange: [number, number] = [0, Math.max(1, ...totals)];
  const sy = scale(yRange, [H - M.bottom, M.top]);
  const bars: string[] = [];
  x.forEach((xv, i) => {
    let base = 0;
    stacks.forEach((s, k) => {
      const v = Number.isFinite(s.values[i]) ? s.values[i] : 0;
      if (v <= 0) return;
      const color = s.color ?? PALETTE[k % PALETTE.length];
      const [top, bottom] = [sy(base + v), sy(base)];
      bars.push(
        `<rect x="${r(sx(xv) - width / 2)}" y="${r(top)}" width="${r(width)}" height="${r(bottom - top)}" ` +
          `fill="${color}"><title>${escapeHtml(`${s.name} at ${xv}: ${formatNumber(v)}`)}</title></rect>`,
      );
      base += v;
    });
  });
  const legend = stacks.map((s, k) => ({ name: s.name, color: s.color ?? PALETTE[k % PALETTE.length] }));
  return figure(opts, axes(xr, yRange, sx, sy, opts) + bars.join(""), legend);
}

type Scale = (v: number) => number;

function scale([d0, d1]: [number, number], [r0, r1]: [number, number]): Scale {
  const span = d1 - d0 || 1;
  // A single x value sits in the middle of the axis rather than at its left edge.
  return d1 === d0 ? () => (r0 + r1) / 2 : (v) => r0 + ((v - d0) / span) * (r1 - r0);
}

function extent(values: readonly number[]): [number, number] {
  return [Math.min(...values), Math.max(...values)];
}

/** The data range with 5% room, or ±1 around a constant. */
function padded([lo, hi]: [number, number]): [number, number] {
  if (lo === hi) return [lo - (Math.abs(lo) || 1) * 0.1, hi + (Math.abs(hi) || 1) * 0.1];
  const pad = (hi - lo) * 0.05;
  return [lo - pad, hi + pad];
}

function linePath(s: Series, sx: Scale, sy: Scale): string {
  let d = "";
  let pen = false;
  s.x.forEach((x, k) => {
    const y = s.y[k];
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      pen = false;
      return;
    }
    d += `${pen ? "L" : "M"}${r(sx(x))},${r(sy(y))}`;
    pen = true;
  });
  return d || "M0,0";
}

/** Axis lines with three y ticks and up to six integer x ticks. */
function axes(xr: [number, number], yr: [number, number], sx: Scale, sy: Scale, opts: ChartOptions): string {
  const yTicks = [yr[0], (yr[0] + yr[1]) / 2, yr[1]];
  const step = Math.max(1, Math.ceil((xr[1] - xr[0]) / 5));
  const xTicks: number[] = [];
  for (let x = Math.ceil(xr[0]); x <= xr[1]; x += step) xTicks.push(x);
  const parts = [
    `<line x1="${M.left}" y1="${H - M.bottom}" x2="${W - M.right}" y2="${H - M.bottom}" stroke="#888"/>`,
    `<line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${H - M.bottom}" stroke="#888"/>`,
    ...yTicks.map((y) =>
      `<text x="${M.left - 4}" y="${r(sy(y)) + 4}" text-anchor="end" class="tick">${formatNumber(y)}</text>` +
      `<line x1="${M.left}" y1="${r(sy(y))}" x2="${W - M.right}" y2="${r(sy(y))}" stroke="#eee"/>`
    ),
    ...xTicks.map((x) =>
      `<text x="${r(sx(x))}" y="${H - M.bottom + 14}" text-anchor="middle" class="tick">${x}</text>`
    ),
    `<text x="${(M.left + W - M.right) / 2}" y="${H - 4}" text-anchor="middle" class="tick">${
      escapeHtml(opts.xLabel ?? "step")
    }</text>`,
  ];
  return parts.join("");
}

function figure(opts: ChartOptions, body: string, legend: { name: string; color: string }[]): string {
  const keys = legend.map((l) =>
    `<span class="key"><span class="swatch" style="background:${l.color}"></span>${escapeHtml(l.name)}</span>`
  );
  return `<figure class="chart" data-chart="${escapeHtml(opts.id)}"><figcaption>${escapeHtml(opts.title)}` +
    `</figcaption><svg viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" ` +
    `role="img" aria-label="${escapeHtml(opts.title)}">${body}</svg><div class="legend">${
      keys.join("")
    }</div></figure>`;
}

function emptyChart(opts: ChartOptions): string {
  return `<figure class="chart empty" data-chart="${escapeHtml(opts.id)}"><figcaption>${
    escapeHtml(opts.title)
  }</figcaption><p class="note">no data</p></figure>`;
}

/** Coordinates rounded to 0.1 px keep the SVG short. */
function r(v: number): number {
  return Math.round(v * 10) / 10;
}
