/**
 * `deno task bench --only demo_seeds`: whether the demo learns on every seed. Runs `deno task demo` (the
 * config `bench.demo_config`, default configs/demo.yaml) once per seed of `bench.demo_seeds` (1–5), each
 * in its own process, one after the other, with `train.seed` and `rollout.generation.seed` set to the seed
 * (the model's weights and the warm start follow `train.seed`: docs/demo.md). Each run's outputs go to
 * runs/bench/demo_seeds/<config>/seed-N/ (its log beside them); its figures are read back from its run
 * directory (`demo.json`). The table: held-out greedy accuracy, calculator use and successful calls per
 * episode before and after GRPO (and after it, the episodes by their number of successful calls), the gain,
 * the warm start's copy steps, wall and CPU minutes, and the machine's load (1-minute average) when the run
 * started and ended; then the mean and the worst gain.
 *
 * `deno task bench --only agent_seeds` does the same with configs/demo_agent.yaml — GRPO through the
 * `openai` example agent (examples/agents/openai_agent.ts) against the in-process gateway — on that
 * file's own `bench.demo_seeds` (`agentSeedsPlan`; docs/agents.md).
 *
 * @module
 */

import { basename, join, resolve } from "node:path";
import { loadConfig } from "../lib/config/mod.ts";
import { callsText, countsText, type DemoPoint, readDemoSummary } from "../lib/demo/result.ts";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

/** The agent demo's configuration (`--only agent_seeds`), relative to the repository root. */
export const AGENT_DEMO_CONFIG = "configs/demo_agent.yaml";

/** A demo configuration and the seeds to run it on. */
export interface DemoSeedsPlan {
  config: string;
  seeds: number[];
}

/**
 * What `--only agent_seeds` runs: configs/demo_agent.yaml's own `bench.demo_config` and `bench.demo_seeds`
 * with the command line's `bench.*` overrides on top (so `--bench.demo_seeds=[4]` picks its seeds too),
 * not those of the bench's configuration. A bad override is refused here, before anything runs.
 */
export async function agentSeedsPlan(overrides: ReadonlyArray<[string, string]>): Promise<DemoSeedsPlan> {
  const bench = overrides.filter(([key]) => key.startsWith("bench."));
  const { config } = await loadConfig({ file: join(ROOT, AGENT_DEMO_CONFIG), overrides: bench });
  return { config: config.bench.demo_config, seeds: config.bench.demo_seeds };
}

/** One seed's run. */
export interface DemoSeedRow {
  seed: number;
  before?: DemoPoint;
  after?: DemoPoint;
  /** Points of held-out accuracy GRPO added (after − before). */
  gain?: number;
  copySteps?: number;
  /** Steps the warm start's mix phase went on because its policy called the calculator too often. */
  extraMixSteps?: number;
  /** Wall-clock minutes of the run (the demo process, from start to exit). */
  minutes: number;
  /** CPU minutes of the demo's process, all threads. */
  cpuMinutes?: number;
  /** The 1-minute load average when the run started and when it ended. */
  load: [number, number];
  error?: string;
}

/** The 1-minute load average, or NaN where the system does not say (`Deno.loadavg`; /proc needs --allow-all). */
function loadAverage(): number {
  try {
    return Deno.loadavg()[0];
  } catch {
    return NaN;
  }
}

/** Runs the demo of `config` with `seed`; its outputs and log under `dir`. */
async function runSeed(config: string, seed: number, dir: string): Promise<DemoSeedRow> {
  await Deno.mkdir(dir, { recursive: true });
  const log = await Deno.open(join(dir, "demo.log"), { write: true, create: true, truncate: true });
  const runDir = join(dir, "run");
  const started = performance.now();
  const loadStart = loadAverage();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      join(ROOT, "stages", "demo.ts"),
      `--config=${config}`,
      `--train.seed=${seed}`,
      `--rollout.generation.seed=${seed}`,
      `--model.path=${join(dir, "model")}`,
      `--loop.run_dir=${runDir}`,
    ],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const copy = async (stream: ReadableStream<Uint8Array>) => {
    for await (let chunk of stream) {
      while (chunk.length > 0) chunk = chunk.subarray(await log.write(chunk));
    }
  };
  await Promise.all([copy(child.stdout), copy(child.stderr)]);
  log.close();
  const status = await child.status;
  const minutes = (performance.now() - started) / 60000;
  const load: [number, number] = [loadStart, loadAverage()];
  if (!status.success) {
    return { seed, minutes, load, error: `exit ${status.code}; see ${join(dir, "demo.log")}` };
  }
  const r = await readDemoSummary(runDir);
  const gain = 100 * (r.after.accuracy - r.before.accuracy);
  const cpuMinutes = r.cpuSeconds / 60;
  return {
    seed,
    before: r.before,
    after: r.after,
    gain,
    copySteps: r.warmStart.copySteps,
    extraMixSteps: r.warmStart.extraMixSteps ?? 0,
    minutes,
    cpuMinutes,
    load,
  };
}

/** The demo for each seed, one after the other; a failed run is a row with its error. */
export async function runDemoSeeds(config: string, seeds: readonly number[], out: string) {
  const path = resolve(ROOT, config);
  const rows: DemoSeedRow[] = [];
  for (const seed of seeds) {
    console.error(`demo_seeds: ${config}, seed ${seed} …`);
    const dir = join(out, "demo_seeds", basename(path).replace(/\.ya?ml$/, ""), `seed-${seed}`);
    rows.push(await runSeed(path, seed, dir));
    const r = rows.at(-1)!;
    console.error(
      r.error ?? `demo_seeds: seed ${seed}: ${pointText(r.before!, r.after!)} in ${r.minutes.toFixed(1)} min`,
    );
  }
  return { config, seeds, rows };
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

function pointText(before: DemoPoint, after: DemoPoint): string {
  return `accuracy ${pct(before.accuracy)} -> ${pct(after.accuracy)}`;
}

/** Markdown: one row per seed, then the mean and the worst gain. */
export function demoSeedsTable(r: { config: string; rows: DemoSeedRow[] }): string[] {
  const ok = r.rows.filter((row) => row.gain !== undefined);
  const gains = ok.map((row) => row.gain!);
  const mean = gains.reduce((a, b) => a + b, 0) / Math.max(gains.length, 1);
  const lines = [
    `### The demo on every seed (${r.config})`,
    "",
    "| seed | held-out accuracy before → after | gain (points) | calculator use before → after | successful calls / episode before → after | episodes by successful calls, after | copy steps | extra mix steps | minutes | CPU minutes | load (start, end) |",
    "| ---: | --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: | --- |",
    ...r.rows.map((row) => {
      const load = row.load.map((x) => x.toFixed(1)).join(", ");
      if (row.error) {
        return `| ${row.seed} | failed: ${row.error} | | | | | | | ${row.minutes.toFixed(1)} | | ${load} |`;
      }
      const [b, a] = [row.before!, row.after!];
      return `| ${row.seed} | ${pct(b.accuracy)} → ${pct(a.accuracy)} | ${signed(row.gain!)} | ` +
        `${pct(b.toolUse)} → ${pct(a.toolUse)} | ${callsText(b)} → ${callsText(a)} | ` +
        `${countsText(a.callsOkEpisodes)} | ` +
        `${row.copySteps} | ${row.extraMixSteps} | ${row.minutes.toFixed(1)} | ${
          row.cpuMinutes!.toFixed(1)
        } | ${load} |`;
    }),
    "",
    `Mean gain ${signed(mean)} points; worst ${gains.length ? signed(Math.min(...gains)) : "–"} points ` +
    `(${ok.length} of ${r.rows.length} runs finished).`,
  ];
  return lines;
}

function signed(x: number): string {
  return `${x >= 0 ? "+" : ""}${x.toFixed(1)}`;
}
