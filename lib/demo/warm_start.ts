/**
 * The demo's supervised warm start: the teacher's traces (traces.ts) trained with the `sft` loss by the
 * pipeline's train stage, one optimizer step per call on the next `tracesPerStep` traces, all in one
 * session (the model and its train graph are opened once) — then saved as a checkpoint the loop
 * continues from.
 *
 * Two phases:
 * 1. copy: calculator traces only, so the circuits that copy the task's expression into the call and the
 *    tool's result into the answer form before anything competes for them. Every `probeEvery` steps the
 *    probe (probe.ts) answers unseen training tasks greedily; the phase ends once its accuracy reaches
 *    `copyAccuracy` (or after `copyMaxSteps`). How many steps the copying needs depends on the seed, so
 *    a fixed length either stopped some seeds before it formed or trained others far past it.
 * 2. mix: `mixSteps` steps on all traces, a share `directFraction` of them answering at once with a wrong
 *    number: the starting policy then often skips the calculator — the one decision GRPO has to change.
 *    The recovery traces (a broken call, the tool's error, the call again) train here only, so the copy
 *    phase is the same with or without them (docs/demo.md). After a long copy phase the call can be so
 *    ingrained that the mix does not move it, and the greedy policy calls on every task: GRPO then has
 *    nothing to change but copying it cannot improve, and lost accuracy doing so (docs/demo.md, "A strong
 *    start"). So the phase ends with a probe of the policy as GRPO will start it (no token given), and goes
 *    on at a tenth of the peak rate, `probeEvery` steps at a time, while it calls the calculator on more
 *    than `maxStartToolUse` of the probe tasks (at most `extraMixSteps` more steps).
 *
 * The learning rate: a linear warm-up, then a cosine decay towards a tenth at `copyMaxSteps`; the mix
 * phase decays from `settings.mixLr` (or from where the copy phase stopped) to a tenth (`copyLr`, `mixLr`:
 * this module runs its own schedule, one rate per train call).
 *
 * The checkpoint is saved with a fresh optimizer state: GRPO's first steps are not scaled by the sft
 * gradients' Adam moments.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { readStageFile } from "../arrow/read.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import type { Config } from "../config/schema.ts";
import { shuffled } from "../data/random.ts";
import type { Task } from "../data/task.ts";
import { UserError } from "../errors.ts";
import { type CheckpointOutput, train, type TrainSummary, writeStageOutput } from "../pipeline/mod.ts";
import { toolCallColumns } from "../score/episode.ts";
import type { StepMetrics } from "../train/step.ts";
import { initOptimizerState } from "../train/optimizer.ts";
import { type ProbeResult, WarmStartProbe } from "./probe.ts";
import type { WarmStartSettings } from "./settings.ts";
import { type WarmStartInputs, writeWarmStartBatch } from "./traces.ts";

export { tracePlans, type WarmStartInputs, writeWarmStartBatch, wrongAnswer } from "./traces.ts";

/** The warm start's phases: copy, mix, and the mix going on for the start check (`extra`). */
export type WarmStartPhase = "copy" | "mix" | "extra";

/** One warm-start event: a step (with its loss) or a probe (with what it measured). */
export type WarmStartEvent =
  | { kind: "step"; phase: WarmStartPhase; step: number; loss: number }
  | { kind: "probe"; probe: ProbeResult }
  | { kind: "start_probe"; probe: ProbeResult };

/** Called after each warm-start step and probe. */
export type WarmStartProgress = (event: WarmStartEvent) => void;

/** What the warm start produced. */
export interface WarmStartResult {
  /** The checkpoint directory (`dir/adapter`). */
  out: string;
  /** One row per optimizer step. */
  metrics: StepMetrics[];
  /** Steps of the copy phase (it ends early once the probe's accuracy reaches `copyAccuracy`). */
  copySteps: number;
  /** Every probe, in order; the last one is taken after the mix phase. */
  probes: ProbeResult[];
  /** Steps the mix phase went on for `maxStartToolUse` (after its `mixSteps`). */
  extraMixSteps: number;
  /** The probes of the policy GRPO starts from (greedy, no token given), after the mix phase's steps. */
  startProbes: ProbeResult[];
  seconds: number;
}

/** The trace rows of each phase: calculator traces whose calls all succeed (copy), and all (mix). */
export interface TracePools {
  tool: number[];
  all: number[];
}

/**
 * The run's configuration as the warm start trains: the `sft` loss, one optimizer step per call (the
 * learning rate of each is the warm start's own: `copyLr`, `mixLr`). Its traces and probe play the
 * `tools` environment whatever GRPO's is: the teacher writes calculator traces, it is not the user's agent
 * or environment (with `agent`, GRPO's first prompts render as the tools environment's: docs/agents.md).
 */
export function warmStartConfig(config: Config, s: WarmStartSettings): Config {
  const { train: t, rollout: r } = config;
  return {
    ...config,
    rollout: { ...r, environment: { ...r.environment, kind: "tools", module: null } },
    train: {
      ...t,
      num_iterations: 1,
      optimizer: { ...t.optimizer, lr: s.lr },
      loss: {
        ...t.loss,
        objective: "sft",
        aggregation: "token_mean",
        eps_low: 0.2,
        eps_high: 0.2,
        beta: 0,
        rollout_is: "none",
      },
    },
    loop: { ...config.loop, steps: s.copyMaxSteps + s.mixSteps },
  };
}

/** The warm start: traces, the copy phase, the mix phase; returns the checkpoint at `dir/adapter`. */
export async function warmStart(i: WarmStartInputs, onEvent?: WarmStartProgress): Promise<WarmStartResult> {
  const started = performance.now();
  const s = i.settings;
  const batch = await readStageFile(await writeWarmStartBatch(i), "batch");
  const pools = requireCopyPool(tracePools(batch), batch.path, s);
  const probe = await WarmStartProbe.open(i.session, probeTasks(i));
  const startProbe = await WarmStartProbe.open(i.session, probeTasks(i), { firstTokenGiven: false });
  const metrics: StepMetrics[] = [];
  const probes: ProbeResult[] = [];
  const startProbes: ProbeResult[] = [];
  let last: CheckpointOutput<TrainSummary> | undefined;
  const sft = async (pool: number[], local: number, lr: number, phase: WarmStartPhase) => {
    const rows = stepRows(pool, s, local, phase);
    last = await train(i.session, batch, { step: metrics.length, rows, lr });
    const [row] = last.summary.metrics;
    metrics.push(row);
    onEvent?.({ kind: "step", phase, step: metrics.length, loss: row.loss });
  };
  // Runs `p` on the adapter as it stands, records the result in `into` and reports it as `kind`.
  const probeWith = async (p: WarmStartProbe, into: ProbeResult[], kind: "probe" | "start_probe") => {
    const { adapter } = (await i.session.trainer()).checkpoint;
    into.push(await p.run(metrics.length, adapter));
    onEvent?.({ kind, probe: into.at(-1)! });
    return into.at(-1)!;
  };
  const probeNow = () => probeWith(probe, probes, "probe");
  const callsTooOften = async () =>
    (await probeWith(startProbe, startProbes, "start_probe")).toolUse > s.maxStartToolUse;
  let copySteps = 0;
  while (copySteps < s.copyMaxSteps) {
    await sft(pools.tool, copySteps, copyLr(s, copySteps + 1), "copy");
    copySteps++;
    if (copySteps % s.probeEvery !== 0) continue;
    await probeNow();
    if (probes.at(-1)!.accuracy >= s.copyAccuracy) break;
  }
  const start = s.mixLr ?? copyLr(s, Math.max(copySteps, 1));
  for (let k = 0; k < s.mixSteps; k++) await sft(pools.all, k, mixLr(s, k, start), "mix");
  // Extra mix steps go on at the rate the mix phase ended at.
  const extraLr = mixLr(s, s.mixSteps - 1, start);
  let extra = 0;
  while (s.maxStartToolUse < 1 && last && await callsTooOften() && extra < s.extraMixSteps) {
    const chunk = Math.min(s.probeEvery, s.extraMixSteps - extra);
    for (let k = 0; k < chunk; k++, extra++) await sft(pools.all, s.mixSteps + extra, extraLr, "extra");
  }
  if (!last) throw new RangeError("warm start: copyMaxSteps + mixSteps must be at least 1");
  await probeNow();
  const out = resolve(join(i.dir, "adapter"));
  const { state } = last.checkpoint;
  const fresh = initOptimizerState(state.optimizer.name, state.adapter.weights);
  await writeStageOutput(out, {
    ...last,
    checkpoint: { ...last.checkpoint, state: { ...state, optimizer: fresh } },
  });
  return {
    out,
    metrics,
    copySteps,
    probes,
    extraMixSteps: extra,
    startProbes,
    seconds: (performance.now() - started) / 1000,
  };
}

/** The probe's tasks: training tasks after the traces' (the first ones when there are none left). */
function probeTasks(i: WarmStartInputs): readonly Task[] {
  const s = i.settings;
  const after = i.tasks.slice(s.traces, s.traces + s.probeTasks);
  return after.length > 0 ? after : i.tasks.slice(0, s.probeTasks);
}

/**
 * The copy phase's learning rate at step `step` (1-based): linear warm-up, then a cosine decay towards a
 * tenth at `copyMaxSteps` (the copy circuits form at a high rate; a lower one then sharpens them).
 */
export function copyLr(s: WarmStartSettings, step: number): number {
  if (step <= s.warmupSteps) return (s.lr * step) / Math.max(1, s.warmupSteps);
  const progress = Math.min(1, (step - s.warmupSteps) / Math.max(1, s.copyMaxSteps - s.warmupSteps));
  return cosine(s.lr, s.lr / 10, progress);
}

/** The mix phase's learning rate at its step `k` (0-based): a cosine decay from `start` to a tenth of the peak. */
export function mixLr(s: WarmStartSettings, k: number, start: number): number {
  return cosine(start, s.lr / 10, s.mixSteps > 1 ? k / (s.mixSteps - 1) : 1);
}

function cosine(from: number, to: number, progress: number): number {
  return to + (from - to) * 0.5 * (1 + Math.cos(Math.PI * progress));
}

/**
 * The rows of the trace batch by what they hold: calculator traces whose calls all succeed (the copy
 * phase's), and all (the mix phase's: direct answers and recovery traces too).
 */
export function tracePools(batch: StageFile): TracePools {
  const calls = toolCallColumns(batch);
  const all = Array.from({ length: batch.rows }, (_, row) => row);
  const tool = all.filter((row) => {
    const [from, to] = [calls.offsets[row], calls.offsets[row + 1]];
    return to > from && calls.status.slice(from, to).every((status) => status === "ok");
  });
  return { tool, all };
}

/** Refuses a copy phase with no trace to train on (its steps would read no rows). */
export function requireCopyPool(pools: TracePools, path: string, s: WarmStartSettings): TracePools {
  if (pools.tool.length > 0 || s.copyMaxSteps === 0) return pools;
  throw new UserError(`warm-start traces ${path}`, {
    why: `none of its ${pools.all.length} traces is a calculator trace whose calls all succeed, and the ` +
      "copy phase trains on those only",
    fix: "raise demo.warm_start.traces or lower demo.warm_start.direct_fraction (or set " +
      "demo.warm_start.copy_max_steps to 0)",
  });
}

/**
 * The rows of a phase's step `local` (0-based): the next `tracesPerStep` of its pool, walking through it
 * in an order reshuffled each pass.
 */
function stepRows(
  pool: number[],
  s: WarmStartSettings,
  local: number,
  phase: WarmStartPhase,
): number[] {
  const out: number[] = [];
  for (let k = local * s.tracesPerStep; out.length < s.tracesPerStep; k++) {
    const pass = Math.floor(k / pool.length);
    out.push(shuffled(pool, s.seed * 1000 + pass + (phase === "copy" ? 0 : 500))[k % pool.length]);
  }
  return out;
}
