/**
 * `deno task bench --only algorithms`: the advantage estimators side by side on the demo's tasks.
 *
 * For each task configuration (default `configs/demo.yaml`, and `configs/demo_multistep.yaml` where it
 * exists; `--tasks a.yaml,b.yaml` to choose) and each seed (`--seeds 3`): one warm start (the demo's
 * model and supervised warm start, algorithms_warm.ts, the expensive part), then one loop run per
 * algorithm from that warm start, with the task configuration's own steps, samples and evaluations:
 * grpo, dr_grpo, rloo, mt_grpo, mt_grpo_turns (each `mask.estimator` alone, everything else the
 * configuration's), ppo (`mask.estimator: gae` with PPO's settings below), the policy losses gspo and
 * cispo (`train.loss.objective`, with grpo's advantages; docs/algorithms.md), and dapo (grpo with DAPO's
 * dynamic sampling, `loop.filter_groups`, and clip-higher). Each warm start and each run
 * is its own process (`stages/loop.ts`), and a run whose directory already ends at the last step is kept,
 * so a bench stopped midway continues where it stopped when started again.
 *
 * Everything lands in runs/bench/algorithms/<task>/: `models/seed-N`, `warm-seed-N/`, `<algorithm>/seed-N`
 * (each a run directory) and `compare.html` (`deno task report` over the task's runs). The section returns
 * the per-run numbers; bench/report.ts turns them into BENCH.md's table.
 *
 * @module
 */

import { basename, join, resolve } from "node:path";
import { readStageFile } from "../lib/arrow/read.ts";
import { loadRunData } from "../lib/report/mod.ts";
import { fileURLToPath } from "node:url";

/** The algorithms compared, each as config overrides on top of the task configuration. */
export const ALGORITHMS: Readonly<Record<string, ReadonlyArray<[string, string]>>> = {
  grpo: [["mask.estimator", "grpo"]],
  dr_grpo: [["mask.estimator", "dr_grpo"]],
  rloo: [["mask.estimator", "rloo"]],
  mt_grpo: [["mask.estimator", "mt_grpo"]],
  mt_grpo_turns: [["mask.estimator", "mt_grpo_turns"]],
  // PPO as seed 002 runs it: GAE per turn, whitened advantages, 4 epochs of minibatches; two
  // minibatches per batch at the demo's 64 episodes, so 8 optimizer steps per batch where GRPO takes one.
  // At GRPO's learning rate (the demo's 3e-3) that moved the policy far in the first batch (approx-KL
  // 0.13, held-out accuracy 4.5% → 0.5% on seed 1); at a sixth of it, with the fresh value head learning
  // at 1e-3 instead of seed 002's 1e-4, PPO learns (4.5% → 91.5%; BENCH.md).
  ppo: [
    ["mask.estimator", "gae"],
    ["mask.gae_unit", "turn"],
    ["mask.whiten", "true"],
    ["train.ppo_epochs", "4"],
    ["train.minibatch_episodes", "32"],
    ["train.optimizer.lr", "5e-4"],
    ["train.value.lr", "1e-3"],
  ],
  // GSPO with the paper's clip range on the sequence ratio (3e-4, 4e-4), as verl's GSPO recipe; its own
  // aggregation (seq_mean_token_mean) as the paper's. Measured in BENCH.md (issue 30).
  gspo: [
    ["train.loss.objective", "gspo"],
    ["train.loss.eps_low", "3e-4"],
    ["train.loss.eps_high", "4e-4"],
    ["train.loss.aggregation", "seq_mean_token_mean"],
  ],
  // CISPO one-sided as the paper and TRL (eps_low 0.99: no lower clip in effect; 1 + eps_high = 5, TRL's
  // cap). With one optimizer step per batch every ratio is 1 and it trains exactly as grpo (BENCH.md).
  cispo: [
    ["train.loss.objective", "cispo"],
    ["train.loss.eps_low", "0.99"],
    ["train.loss.eps_high", "4"],
  ],
  // DAPO as verl's DAPO recipe runs it: dynamic sampling on the accuracy (`filter_groups.metric: acc`,
  // ours `correct`; at most 10 generation batches a step), clip-higher (eps_high 0.28) and token-level
  // aggregation, with grpo's advantages. The overlong reward is the task configuration's to add (it needs
  // its lengths). Measured in BENCH.md.
  dapo: [
    ["loop.filter_groups.enable", "true"],
    ["loop.filter_groups.metric", "correct"],
    ["loop.filter_groups.max_num_gen_batches", "10"],
    ["train.loss.eps_high", "0.28"],
    ["train.loss.aggregation", "token_mean"],
  ],
};

export interface AlgorithmsOptions {
  /** Task configuration files. */
  tasks: string[];
  seeds: number;
  /** The algorithms to run (default all). */
  algorithms?: string[];
  /** Extra overrides for every run (e.g. `loop.steps`). */
  overrides?: Array<[string, string]>;
  /** The root folder (default runs/bench/algorithms). */
  root: string;
}

/** One run's numbers. */
export interface RunResult {
  task: string;
  algorithm: string;
  seed: number;
  dir: string;
  /** Held-out accuracy and tool-use rate after the warm start (step 0) and at the end. */
  accuracyBefore: number;
  accuracyAfter: number;
  toolUseBefore: number;
  toolUseAfter: number;
  /** Training tool calls that succeeded at the last step (NaN when it made none). */
  toolSuccessLast: number;
  steps: number;
  seconds: number;
  error?: string;
}

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));

/** The default task configurations: the demo's, and the multi-step one where it exists. */
export function defaultTaskConfigs(): string[] {
  const multistep = join(ROOT, "configs", "demo_multistep.yaml");
  let hasMultistep = false;
  try {
    hasMultistep = Deno.statSync(multistep).isFile;
  } catch { /* not there yet: the demo's task only */ }
  return [join(ROOT, "configs", "demo.yaml"), ...(hasMultistep ? [multistep] : [])];
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

/** Runs `deno run -A script args…` with stderr shown; returns its stdout. */
async function denoRun(script: string, args: string[]): Promise<{ ok: boolean; stdout: string }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", join(ROOT, script), ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).output();
  return { ok: out.success, stdout: new TextDecoder().decode(out.stdout) };
}

/** The warm start of `task` for `seed` (made once; kept when it exists). */
async function warmStart(
  task: string,
  seed: number,
  root: string,
): Promise<{ model: string; adapter: string }> {
  const model = join(root, "models", `seed-${seed}`);
  const dir = join(root, `warm-seed-${seed}`);
  const adapter = join(dir, "warm", "adapter");
  if (await exists(join(adapter, "adapter_model.safetensors"))) return { model, adapter };
  await Deno.remove(model, { recursive: true }).catch(() => {});
  await Deno.remove(dir, { recursive: true }).catch(() => {});
  console.error(`algorithms: warm start, ${basename(task)} seed ${seed} …`);
  const r = await denoRun("bench/algorithms_warm.ts", [
    `--config=${task}`,
    `--seed=${seed}`,
    `--model=${model}`,
    `--dir=${dir}`,
  ]);
  if (!r.ok) throw new Error(`warm start of ${task} seed ${seed} failed`);
  return { model, adapter };
}

/** Whether the run in `dir` has completed `steps` steps. */
async function complete(dir: string, steps: number): Promise<boolean> {
  const latest = await Deno.readTextFile(join(dir, "latest")).catch(() => "");
  return latest.trim() === `step-${String(steps).padStart(4, "0")}`;
}

/** One algorithm's run of one seed (kept when already complete). */
async function runOne(
  task: string,
  algorithm: string,
  seed: number,
  warm: { model: string; adapter: string },
  o: AlgorithmsOptions & { steps: number },
): Promise<RunResult> {
  const taskName = basename(task, ".yaml");
  const dir = join(o.root, taskName, algorithm, `seed-${seed}`);
  const started = performance.now();
  let error: string | undefined;
  if (!(await complete(dir, o.steps))) {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
    console.error(`algorithms: ${taskName} ${algorithm} seed ${seed} …`);
    const overrides = [
      ["model.path", warm.model],
      ["model.adapter", warm.adapter],
      ["loop.run_dir", dir],
      ["train.seed", String(seed)],
      ["rollout.generation.seed", String(seed)],
      ...ALGORITHMS[algorithm],
      ...(o.overrides ?? []),
    ];
    const r = await denoRun("stages/loop.ts", [
      `--config=${task}`,
      ...overrides.map(([k, v]) => `--${k}=${v}`),
    ]);
    if (!r.ok) error = "the loop failed (its output is above)";
  }
  return {
    ...(await runNumbers(dir)),
    task: taskName,
    algorithm,
    seed,
    dir,
    seconds: (performance.now() - started) / 1000,
    ...(error ? { error } : {}),
  };
}

/** Held-out and training numbers of a run directory. */
async function runNumbers(dir: string) {
  const run = await loadRunData(dir).catch(() => null);
  const evals = run?.evals ?? [];
  const calls = run?.metrics?.columns.get("tool_calls_per_episode") ?? [];
  const failures = run?.metrics?.columns.get("tool_failure_rate") ?? [];
  const last = calls.length - 1;
  return {
    accuracyBefore: evals[0]?.accuracy ?? NaN,
    accuracyAfter: evals.at(-1)?.accuracy ?? NaN,
    toolUseBefore: evals[0]?.toolUseRate ?? NaN,
    toolUseAfter: evals.at(-1)?.toolUseRate ?? NaN,
    toolSuccessLast: last >= 0 && calls[last] > 0 ? 1 - failures[last] : NaN,
    steps: run?.metrics?.steps.length ?? 0,
  };
}

/** The loop's step count of a task configuration with the overrides applied. */
async function stepsOf(task: string, overrides: Array<[string, string]>): Promise<number> {
  const { loadConfig } = await import("../lib/config/mod.ts");
  return (await loadConfig({ file: task, overrides })).config.loop.steps;
}

/** Every task × seed × algorithm; returns one result per run and writes each task's comparison page. */
export async function algorithmsSection(o: AlgorithmsOptions): Promise<RunResult[]> {
  const algorithms = o.algorithms ?? Object.keys(ALGORITHMS);
  const results: RunResult[] = [];
  for (const task of o.tasks) {
    const root = join(o.root, basename(task, ".yaml"));
    const steps = await stepsOf(task, o.overrides ?? []);
    for (let seed = 1; seed <= o.seeds; seed++) {
      const warm = await warmStart(task, seed, root);
      for (const algorithm of algorithms) {
        results.push(await runOne(task, algorithm, seed, warm, { ...o, steps }));
      }
    }
    const runs = results.filter((r) => r.task === basename(task, ".yaml") && r.steps > 0).map((r) => r.dir);
    if (runs.length > 1) {
      await denoRun("stages/report.ts", [...runs, "--out", join(root, "compare.html"), "--overwrite"]);
    }
  }
  return results;
}

/** Whether a run directory's eval files exist (for tests of the section's layout). */
export async function hasEvals(dir: string): Promise<boolean> {
  return await readStageFile(join(dir, "eval", "step-0000.arrow"), "eval").then(() => true, () => false);
}
