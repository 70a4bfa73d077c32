/**
 * The loop as a user runs it (`stages/loop.ts` in its own process), in two measurements:
 *
 * 1. seconds per step on the demo's configuration (configs/demo.yaml, the demo's model shape with fresh
 *    weights, no evaluation): each stage's seconds from the run's metrics.arrow, and the process's wall
 *    time over the steps;
 * 2. the peak RSS (VmHWM, polled while it runs) of a 3-step loop on a 0.6B-shaped model: 2 episodes of
 *    up to 256 tokens per step, LoRA r16 on all seven projections.
 *
 * Each runs for the checkout it is given: this one (with `model.shared_weights` true and false) and,
 * with `--before REV`, an older revision checked out under runs/bench/ (bench/checkout.ts), so that "before"
 * and "after" a change are measured in the same run. Prints one JSON object.
 *
 *   deno run -A bench/loop_bench.ts --demo-model DIR --big-model DIR [--before REV] [--steps 4]
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { join, resolve } from "node:path";
import { readStageFile } from "../lib/arrow/read.ts";
import { checkoutBefore } from "./checkout.ts";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

/** One checkout to measure, and the overrides only it understands. */
interface Variant {
  name: string;
  dir: string;
  extra: string[];
}

/** Runs `stages/loop.ts` in `v.dir`; returns its wall seconds and its peak RSS in MiB. */
async function runLoop(
  v: Variant,
  args: string[],
): Promise<{ seconds: number; peakMiB: number; code: number }> {
  const started = performance.now();
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", "stages/loop.ts", ...args, ...v.extra],
    cwd: v.dir,
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).spawn();
  let peakKiB = 0;
  const poll = setInterval(() => {
    try {
      const status = Deno.readTextFileSync(`/proc/${child.pid}/status`);
      peakKiB = Math.max(peakKiB, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0));
    } catch { /* exited */ }
  }, 100);
  const [status, stderr] = await Promise.all([child.status, new Response(child.stderr).text()]);
  clearInterval(poll);
  if (!status.success) throw new Error(`${v.name}: loop exited ${status.code}: ${stderr.trim().slice(-400)}`);
  return {
    seconds: (performance.now() - started) / 1000,
    peakMiB: Math.round(peakKiB / 1024),
    code: status.code,
  };
}

/** Seconds per step on the demo's configuration, from the run's metrics. */
async function demoSteps(v: Variant, model: string, steps: number) {
  const run = await Deno.makeTempDir({ prefix: `loop-bench-${v.name}-` });
  const wall = await runLoop(v, [
    "--config",
    "configs/demo.yaml",
    `--model.path=${model}`,
    `--loop.run_dir=${join(run, "run")}`,
    `--loop.steps=${steps}`,
    "--loop.eval_every=0",
  ]);
  const metrics = await readStageFile(join(run, "run", "metrics.arrow"), "run_metrics");
  const col = (name: string) => Array.from(metrics.vector(name).toArray() as Float64Array);
  const stages = ["rollout", "score", "mask", "train"].map((s) => [s, mean(col(`seconds_${s}`))]);
  await Deno.remove(run, { recursive: true });
  return { steps, wall_seconds: wall.seconds, peak_mib: wall.peakMiB, ...Object.fromEntries(stages) };
}

/** Peak RSS of a 3-step loop on the big model. */
async function bigPeak(v: Variant, model: string) {
  const run = await Deno.makeTempDir({ prefix: `loop-bench-big-${v.name}-` });
  const wall = await runLoop(v, [
    `--model.path=${model}`,
    `--loop.run_dir=${join(run, "run")}`,
    "--loop.steps=3",
    "--loop.eval_every=0",
    "--rollout.tasks_per_step=1",
    "--rollout.group_size=2",
    "--rollout.generation.max_new_tokens=224", // random weights rarely stop: about 2 × 256 tokens per step
    "--rollout.generation.max_total_tokens=256",
    "--rollout.tools.enabled=[]",
    "--train.lora.r=16",
    "--train.lora.alpha=32",
    "--data.system_prompt=null",
  ]);
  await Deno.remove(run, { recursive: true });
  return { steps: 3, wall_seconds: wall.seconds, peak_mib: wall.peakMiB };
}

function mean(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0) / Math.max(xs.length, 1);
}

if (import.meta.main) {
  const args = parseArgs(Deno.args, { string: ["demo-model", "big-model", "before", "steps"] }).values;
  const steps = Number(args.steps ?? 4);
  const variants: Variant[] = [
    { name: "shared", dir: ROOT, extra: [] },
    { name: "separate", dir: ROOT, extra: ["--model.shared_weights=false"] },
  ];
  if (args.before) {
    variants.push({
      name: `before ${args.before}`,
      dir: await checkoutBefore(ROOT, String(args.before)),
      extra: [],
    });
  }
  const result: Record<string, unknown> = {};
  for (const v of variants) {
    console.error(`loop (${v.name}): demo configuration, ${steps} steps …`);
    const demo = await demoSteps(v, resolve(String(args["demo-model"])), steps);
    console.error(`loop (${v.name}): 0.6B shape, 3 steps …`);
    const big = await bigPeak(v, resolve(String(args["big-model"])));
    result[v.name] = { demo, big };
  }
  console.log(JSON.stringify(result));
}
