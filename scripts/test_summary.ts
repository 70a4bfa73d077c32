/**
 * `deno test`'s summary line, read and written: `ok | 3 passed (2 steps) | 1 failed | 1 ignored | 2 filtered
 * out (1s)`, the counts a `deno task test` (scripts/test.ts) adds up over its processes.
 *
 * @module
 */

/** The counts of one summary line (steps are counted apart from tests, as `deno test` does). */
export interface TestTotals {
  passed: number;
  passedSteps: number;
  failed: number;
  failedSteps: number;
  ignored: number;
  ignoredSteps: number;
  filtered: number;
}

/** Counts of nothing run, to add to. */
export function noTests(): TestTotals {
  return { passed: 0, passedSteps: 0, failed: 0, failedSteps: 0, ignored: 0, ignoredSteps: 0, filtered: 0 };
}

const SUMMARY = /^(ok|FAILED) \| \d+ passed/;

/** The counts of the last summary line in `text` (colours removed); null when it has none. */
export function testSummary(text: string): TestTotals | null {
  // deno colours its output unless NO_COLOR is set: strip the escape sequences before reading.
  // deno-lint-ignore no-control-regex
  const lines = text.replace(/\x1b\[[0-9;]*m/g, "").split("\n");
  const line = lines.findLast((l) => SUMMARY.test(l));
  if (line === undefined) return null;
  const count = (word: string) => {
    const m = new RegExp(`(\\d+) ${word}(?: \\((\\d+) steps?\\))?`).exec(line);
    return [Number(m?.[1] ?? 0), Number(m?.[2] ?? 0)];
  };
  const [passed, passedSteps] = count("passed");
  const [failed, failedSteps] = count("failed");
  const [ignored, ignoredSteps] = count("ignored");
  const [filtered] = count("filtered out");
  return { passed, passedSteps, failed, failedSteps, ignored, ignoredSteps, filtered };
}

/** `5m3s`, `12s`, `340ms`: a duration as `deno test` prints it. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/** A summary line in `deno test`'s form for `totals` and `ms` of wall time. */
export function totalsLine(t: TestTotals, ms: number): string {
  const steps = (n: number) => (n ? ` (${n} step${n === 1 ? "" : "s"})` : "");
  const parts = [
    t.failed ? "FAILED" : "ok",
    `${t.passed} passed${steps(t.passedSteps)}`,
    `${t.failed} failed${steps(t.failedSteps)}`,
    ...(t.ignored ? [`${t.ignored} ignored${steps(t.ignoredSteps)}`] : []),
    ...(t.filtered ? [`${t.filtered} filtered out`] : []),
  ];
  return `${parts.join(" | ")} (${formatDuration(ms)})`;
}
