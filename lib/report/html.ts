/**
 * HTML text helpers for the report. Everything that comes from a run (model output, tool output,
 * file names, config values) is untrusted and goes through `escapeHtml` before it reaches the page.
 *
 * @module
 */

const ENTITIES: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#39;",
};

/** Text safe to put in HTML element content and in quoted attribute values. */
export function escapeHtml(text: unknown): string {
  return String(text).replace(/[&<>"']/g, (c) => ENTITIES[c]);
}

/** A number as short text: up to 4 significant digits, "–" for NaN or missing. */
export function formatNumber(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return "–";
  if (value !== 0 && (Math.abs(value) >= 1e5 || Math.abs(value) < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}
