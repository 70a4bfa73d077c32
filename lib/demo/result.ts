/**
 * What a demo run measured, read back from its run directory: held-out accuracy, tool use and successful
 * calculator calls per episode from the loop's eval files (`eval/step-NNNN.arrow`), and the warm start's
 * own record (`warm/warm_start.json`: its seeds, phases and probes). `deno task demo` prints these and
 * writes them with its times to `demo.json`, which `deno task bench --only demo_seeds` reads after each
 * seed's run.
 *
 * @module
 */

import { join } from "node:path";
import { readStageFile } from "../arrow/read.ts";
import { writeTextAtomic } from "../fs/atomic.ts";
import { RunLayout } from "../run/layout.ts";
import type { ProbeResult } from "./probe.ts";

/** Held-out accuracy, tool use and successful calls per episode at one evaluation. */
export interface DemoPoint {
  step: number;
  accuracy: number;
  toolUse: number;
  /** Calculator calls that ran without error, per episode. */
  callsOk: number;
  /**
   * Episodes by their number of calls that ran without error (index k: episodes with k). The mean alone
   * can hide a miss: an episode with an extra call makes up for one with a call too few.
   */
  callsOkEpisodes: number[];
  episodes: number;
}

/** The warm start's record, written to `<run_dir>/warm/warm_start.json`. */
export interface WarmStartRecord {
  /** train.seed and rollout.generation.seed of the run. */
  seeds: { train: number; rollout: number; model: number; warmStart: number };
  copySteps: number;
  mixSteps: number;
  /** Steps the mix phase went on because the starting policy called the calculator too often. */
  extraMixSteps: number;
  /** Every probe: greedy answers on unseen training tasks, after `step` steps. */
  probes: ProbeResult[];
  /** The probes of the policy GRPO starts from (no token given), after the mix phase's steps. */
  startProbes: ProbeResult[];
  modelSeconds: number;
  warmStartSeconds: number;
}

/** The record's path in a demo's run directory. */
export function warmStartRecordPath(runDir: string): string {
  return join(runDir, "warm", "warm_start.json");
}

export async function writeWarmStartRecord(runDir: string, record: WarmStartRecord): Promise<void> {
  await writeTextAtomic(warmStartRecordPath(runDir), JSON.stringify(record, null, 2) + "\n");
}

export async function readWarmStartRecord(runDir: string): Promise<WarmStartRecord> {
  return JSON.parse(await Deno.readTextFile(warmStartRecordPath(runDir)));
}

/** Held-out accuracy, tool use and successful calls from the run's eval file of `step`. */
export async function demoPoint(runDir: string, step: number): Promise<DemoPoint> {
  const file = await readStageFile(new RunLayout(runDir).eval(step), "eval");
  const rows = Math.max(file.rows, 1);
  const share = (name: string) => (file.column(name) as boolean[]).filter(Boolean).length / rows;
  const ok = file.column("tool_calls_ok") as number[];
  return {
    step,
    accuracy: share("correct"),
    toolUse: share("used_tool"),
    callsOk: ok.reduce((a, b) => a + Number(b), 0) / rows,
    callsOkEpisodes: countsByValue(ok.map(Number)),
    episodes: file.rows,
  };
}

/** How many of `values` (non-negative integers) equal each k, for k from 0 to the largest. */
export function countsByValue(values: readonly number[]): number[] {
  const counts = new Array<number>(values.length ? Math.max(...values) + 1 : 0).fill(0);
  for (const v of values) counts[v]++;
  return counts;
}

/**
 * Successful calls per episode to three decimals: over 200 episodes one missing call is 0.005, which two
 * decimals round away.
 */
export function callsText(p: DemoPoint): string {
  return p.callsOk.toFixed(3);
}

/** `countsByValue`'s counts as text, the values that occur only: "1: 1, 2: 191, 3: 8". */
export function countsText(counts: readonly number[]): string {
  return counts.flatMap((n, k) => n > 0 ? [`${k}: ${n}`] : []).join(", ");
}

/** What the demo measured: the evaluation after the warm start (step 0) and after GRPO, and its times. */
export interface DemoSummary {
  before: DemoPoint;
  after: DemoPoint;
  warmStart: WarmStartRecord;
  report: string;
  /** Wall-clock seconds of the whole demo. */
  seconds: number;
  /** CPU seconds of the demo's process (every thread: user + system). */
  cpuSeconds: number;
}

/** The summary's path in a demo's run directory. */
export function demoSummaryPath(runDir: string): string {
  return join(runDir, "demo.json");
}

export async function writeDemoSummary(runDir: string, summary: DemoSummary): Promise<void> {
  await writeTextAtomic(demoSummaryPath(runDir), JSON.stringify(summary, null, 2) + "\n");
}

export async function readDemoSummary(runDir: string): Promise<DemoSummary> {
  return JSON.parse(await Deno.readTextFile(demoSummaryPath(runDir)));
}

/** The demo's closing lines: seed, held-out accuracy, calculator use and calls before and after GRPO. */
export function summaryLines(
  seeds: { train: number; rollout: number },
  r: DemoSummary,
): string[] {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const both = (f: (p: DemoPoint) => string) => `${f(r.before)} -> ${f(r.after)}`;
  const gain = 100 * (r.after.accuracy - r.before.accuracy);
  return [
    `seed ${seeds.train} (train.seed; rollout.generation.seed ${seeds.rollout})`,
    `held-out accuracy (${r.after.episodes} problems, greedy): ${
      pct(r.before.accuracy)
    } after the warm start ` +
    `-> ${pct(r.after.accuracy)} after ${r.after.step} GRPO steps (${gain >= 0 ? "+" : ""}${
      gain.toFixed(1)
    } points)`,
    `calculator use: ${both((p) => pct(p.toolUse))}; successful calls per episode: ` +
    `${both(callsText)} (episodes by successful calls: ${both((p) => countsText(p.callsOkEpisodes))})`,
    outcomeLine(r),
    `report: ${r.report} (demo took ${(r.seconds / 60).toFixed(1)} min; CPU ${
      (r.cpuSeconds / 60).toFixed(1)
    } min)`,
  ];
}

/** Points of room below which the closing line says the warm start left little for GRPO to gain. */
export const LITTLE_ROOM_POINTS = 10;

/**
 * The outcome against the ceiling the warm start met: the last copy probe's accuracy (greedy, each turn's
 * first token given, so every call is made: what the copying reaches). A warm start that already answers
 * near it leaves GRPO little to gain, and the line says so rather than let a small gain or loss read as
 * GRPO's verdict. The probe runs on a few dozen training tasks, so its figure is an estimate.
 */
export function outcomeLine(r: DemoSummary): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const signed = (points: number) => `${points >= 0 ? "+" : ""}${points.toFixed(1)} points`;
  const gain = 100 * (r.after.accuracy - r.before.accuracy);
  const ceiling = r.warmStart.probes.at(-1)?.accuracy;
  if (ceiling === undefined) return `outcome: ${signed(gain)}, ending at ${pct(r.after.accuracy)}`;
  const room = 100 * (ceiling - r.before.accuracy);
  const against = `the warm start's copying reaches ${
    pct(ceiling)
  } with every call made (its last copy probe)`;
  if (room < LITTLE_ROOM_POINTS) {
    return `outcome: the warm start left little room: it answered ${
      pct(r.before.accuracy)
    } and ${against}; ` +
      `GRPO ended at ${pct(r.after.accuracy)} (${signed(gain)})`;
  }
  return `outcome: ${signed(gain)}, ending at ${pct(r.after.accuracy)}; ${against}`;
}
