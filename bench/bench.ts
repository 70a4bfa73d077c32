/**
 * `deno task bench`: engine and trainer speed against peers in the same run, as ratios.
 *
 *   deno task bench [--only engine,train,weights,rollout,loop,score_mask] [--models tiny,qwen3-0.6b]
 *     [--before REV[+FIX…]] [--out DIR] [--bench.k=v …]
 *   deno task bench --only algorithms [--tasks a.yaml,b.yaml] [--seeds 3] [--algorithms grpo,ppo] [--k.v=x …]
 *   deno task bench --only demo_seeds [--bench.demo_config=configs/demo_multistep.yaml] [--bench.demo_seeds=[1,2,3]]
 *   deno task bench --only agent_seeds [--bench.demo_seeds=[1,2,3]]
 *   deno task bench --only gpu [--models qwen3-0.6b,qwen3-1.7b] [--out DIR] [--bench.gpu_ep=webgpu|cuda]
 *
 * `--only` takes a comma-separated list of sections and may repeat; an unknown section is refused
 * (bench/only.ts).
 *
 * For each model of `bench.models` (a directory, or a built-in random shape made once under
 * runs/bench/models/): the engine benchmark (bench/engine_bench.ts) and transformers.js decoding the
 * same weights exported for it (bench/peer_transformersjs.ts); the train benchmark
 * (bench/train_bench.ts) and the PyTorch peer on the same batch (bench/peer_torch.py, needs Debian's
 * python3-torch and libopenblas0-pthread); the loop's process memory with the policy and the trainer both
 * open, their weights separate or shared (bench/weights_bench.ts), with the PyTorch peer's peak on the
 * same batch. Each measurement runs in its own process, one at a time.
 *
 * `--before REV` measures an older revision in the same run (bench/checkout.ts makes it a git worktree;
 * `REV+FIX` applies a later fix it needs to run): the engine and train sections then run `bench.rounds`
 * rounds of the older checkout's bench, this one's and the peer, and report both ratios of each round
 * against that round's one peer figure (bench/before_after.ts); the loop section runs the older loop too.
 *
 * `--only algorithms` (never run unless named) compares the advantage estimators on the demo's tasks
 * (bench/algorithms_bench.ts); its `--a.b=v` overrides go to every run of it.
 *
 * `--only demo_seeds` (never run by default: about ten minutes per seed) runs the demo once per seed of
 * `bench.demo_seeds` with `bench.demo_config` (bench/demo_seeds.ts); `--only agent_seeds` (never run by
 * default either) runs configs/demo_agent.yaml, GRPO through the `openai` example agent, on its own seeds.
 *
 * `--only gpu` (never run by default) measures the GPU path instead (bench/gpu.ts): for each model of
 * `bench.gpu_models` on `bench.gpu_ep`, a LoRA r16 train step (tokens/s, MFU) at each size of
 * `bench.gpu_train_tokens` (default 512 and 8,192 tokens) and decode tokens/s at each batch size of
 * `bench.gpu_batches` (default 1, 8, 32, 64), each against PyTorch (transformers + peft) on the same GPU in
 * the same run; then, from onnxruntime's profile of a separate short run, the kernels, host ms and GPU ms
 * of one decode step and of one train micro-batch run, with the op types that took the most host time.
 * Results go to runs/bench/results-<date>.{json,md} (or under `--out DIR`); paste the Markdown into
 * BENCH.md.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { loadConfig } from "../lib/config/mod.ts";
import { parseCommandLine } from "../lib/cli/args.ts";
import { reportFailure } from "../lib/cli/cli.ts";
import {
  QWEN3_06B_SHAPE_PRESET,
  QWEN3_17B_SHAPE_PRESET,
  TINY_PRESET,
  writeRandomQwen3,
} from "../lib/model/random_model.ts";
import { exportForTransformersJs } from "../lib/model/export.ts";
import { loadTasks } from "../lib/data/mod.ts";
import { buildDemoModel } from "../lib/demo/model.ts";
import { demoSettings } from "../lib/demo/settings.ts";
import { loadTools, toolSpecs } from "../lib/tools/registry.ts";
import { benchEpisodes, writeBatchJson } from "./train_bench.ts";
import { machineLines } from "./report.ts";
import { gpuSection } from "./gpu.ts";
import { agentSeedsPlan, type DemoSeedsPlan, runDemoSeeds } from "./demo_seeds.ts";
import { ResultsFiles } from "./results.ts";
import { type BenchSection, parseOnly } from "./only.ts";
import { ALGORITHMS, algorithmsSection, defaultTaskConfigs } from "./algorithms_bench.ts";
import { UserError } from "../lib/errors.ts";
import { beforeCommits, checkoutBefore } from "./checkout.ts";
import { beforeAfterRounds } from "./before_after.ts";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
/** Where models, batches and results go: runs/bench, or `--out DIR`. */
let OUT = join(ROOT, "runs", "bench");
const BUILT_IN = {
  tiny: TINY_PRESET,
  "qwen3-0.6b": QWEN3_06B_SHAPE_PRESET,
  "qwen3-1.7b": QWEN3_17B_SHAPE_PRESET,
} as const;
const PYTHON = "/usr/bin/python3"; // Debian's, which has python3-torch

/** Runs a benchmark script in its own process (in `cwd`) and returns the JSON object it prints last. */
async function runJson(
  cmd: string,
  args: string[],
  cwd = ROOT,
): Promise<Record<string, unknown> | { error: string }> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" }).output();
  if (!out.success) {
    return { error: new TextDecoder().decode(out.stderr).trim().split("\n").slice(-3).join(" ") };
  }
  const stdout = new TextDecoder().decode(out.stdout).trim();
  return JSON.parse(stdout.slice(stdout.lastIndexOf("\n{") + 1)); // the last JSON object printed
}

/** bench/<script> of the checkout at `root` (this one unless given). */
function denoScript(script: string, args: string[], root = ROOT) {
  return runJson(Deno.execPath(), ["run", "-A", "--quiet", join(root, "bench", script), ...args], root);
}

/** The directory of a model name: a built-in shape (made on first use) or a path. */
async function modelDir(name: string): Promise<string> {
  const preset = BUILT_IN[name as keyof typeof BUILT_IN];
  if (!preset) return resolve(name);
  const dir = join(OUT, "models", name);
  try {
    await Deno.stat(join(dir, "config.json"));
  } catch {
    console.error(`making the random ${name} model in ${dir} …`);
    await writeRandomQwen3(dir, preset);
  }
  return dir;
}

async function exportDir(name: string, dir: string): Promise<string> {
  const out = join(OUT, "exports", name.replace(/[^\w.-]/g, "_"));
  try {
    await Deno.stat(join(out, "onnx", "model.onnx"));
  } catch {
    console.error(`exporting ${name} for transformers.js …`);
    await exportForTransformersJs(dir, out);
  }
  return out;
}

function engineArgs(dir: string, b: BenchSettings): string[] {
  return [
    `--model=${dir}`,
    `--batches=${b.batches.join(",")}`,
    `--prompt=${b.prompt_tokens}`,
    `--decode=${b.decode_tokens}`,
    `--repeats=${b.repeats}`,
    `--threads=${b.threads}`,
  ];
}

async function decodePeer(name: string, dir: string, b: BenchSettings) {
  const peer = [];
  const exported = await exportDir(name, dir);
  for (const batch of b.batches) {
    console.error(`transformers.js: ${name} batch ${batch} …`);
    peer.push(
      await denoScript("peer_transformersjs.ts", [
        `--dir=${exported}`,
        `--batch=${batch}`,
        `--prompt=${b.prompt_tokens}`,
        `--new=${b.decode_tokens}`,
        `--repeats=${b.repeats}`,
        ...(b.threads > 0 ? [`--threads=${b.threads}`] : []),
        "--json",
      ]),
    );
  }
  return peer;
}

async function engineSection(name: string, dir: string, b: BenchSettings) {
  console.error(`engine: ${name} …`);
  const ours = await denoScript("engine_bench.ts", engineArgs(dir, b));
  return { ours, peer: await decodePeer(name, dir, b) };
}

/** Rollout episodes (calculator offered) against raw `generate` at the same batch size, one process. */
function rolloutSection(name: string, dir: string, b: BenchSettings) {
  console.error(`rollout: ${name} …`);
  const batch = b.batches.find((x) => x >= 8) ?? b.batches.at(-1)!;
  return denoScript("rollout_bench.ts", [
    `--model=${dir}`,
    `--batch=${batch}`,
    `--new=${b.decode_tokens}`,
    `--repeats=${b.repeats}`,
  ]);
}

function trainArgs(dir: string, b: BenchSettings): string[] {
  return [`--model=${dir}`, `--repeats=${b.repeats}`, `--threads=${b.threads}`];
}

const trainBatchFile = (name: string) => join(OUT, `train-batch-${name.replace(/[^\w.-]/g, "_")}.json`);

async function trainSection(name: string, dir: string, b: BenchSettings) {
  console.error(`train: ${name} …`);
  const ours = await denoScript("train_bench.ts", [
    ...trainArgs(dir, b),
    `--write-batch=${trainBatchFile(name)}`,
  ]);
  console.error(`PyTorch: ${name} …`);
  return { ours, peer: await torchPeer(dir, trainBatchFile(name), b) };
}

/** `bench.rounds` rounds of the older checkout, this one and the peers (bench/before_after.ts). */
async function beforeAfterSection(
  name: string,
  dir: string,
  b: BenchSettings,
  before: string,
  only: Set<string>,
) {
  const beforeDir = await checkoutBefore(ROOT, before);
  return await beforeAfterRounds(
    {
      after: ROOT,
      before: beforeDir,
      script: (root, script, args) => denoScript(script, args, root),
      engineArgs: engineArgs(dir, b),
      trainArgs: trainArgs(dir, b),
      trainAfterOnly: [`--write-batch=${trainBatchFile(name)}`],
      decodePeer: () => decodePeer(name, dir, b),
      trainPeer: () => torchPeer(dir, trainBatchFile(name), b),
    },
    b.rounds,
    { engine: only.has("engine"), train: only.has("train") },
  );
}

/** The loop's process (policy + trainer, 3 steps) with separate and with shared weights, and PyTorch's peak. */
async function weightsSection(name: string, dir: string, b: BenchSettings) {
  const batchFile = join(OUT, `weights-batch-${name.replace(/[^\w.-]/g, "_")}.json`);
  const run = (weights: string, more: string[] = []) => {
    console.error(`weights (${weights}): ${name} …`);
    return denoScript("weights_bench.ts", [
      `--model=${dir}`,
      `--weights=${weights}`,
      `--threads=${b.threads}`,
      ...more,
    ]);
  };
  const separate = await run("separate", [`--write-batch=${batchFile}`]);
  const shared = await run("shared");
  console.error(`PyTorch: ${name} …`);
  const peer = await torchPeer(dir, batchFile, b);
  return { separate, shared, peer };
}

/**
 * The loop in its own process (bench/loop_bench.ts): seconds per step on the demo's configuration and the
 * peak of a 3-step loop on the 0.6B shape, for this checkout (shared and separate weights) and, with
 * `--before REV`, an older revision; PyTorch's train peak on 2 × 256 tokens beside it.
 */
async function loopSection(b: BenchSettings, before: string | undefined) {
  const demoModel = await demoModelDir();
  const big = await modelDir("qwen3-0.6b");
  const loop = await denoScript("loop_bench.ts", [
    `--demo-model=${demoModel}`,
    `--big-model=${big}`,
    ...(before ? [`--before=${before}`] : []),
  ]);
  const batchFile = join(OUT, "loop-batch-qwen3-0.6b.json");
  const vocab = JSON.parse(await Deno.readTextFile(join(big, "config.json"))).vocab_size;
  await writeBatchJson(batchFile, benchEpisodes(2, 256, vocab));
  console.error("PyTorch: qwen3-0.6b …");
  return { loop, peer: await torchPeer(big, batchFile, { ...b, repeats: 1 }) };
}

/** The demo's model shape with fresh weights (configs/demo.yaml's tasks and tools make its vocabulary). */
async function demoModelDir(): Promise<string> {
  const dir = join(OUT, "models", "demo");
  try {
    await Deno.stat(join(dir, "config.json"));
    return dir;
  } catch {
    console.error(`making the demo's model in ${dir} …`);
  }
  const { config } = await loadConfig({ file: join(ROOT, "configs", "demo.yaml") });
  const tasks = await loadTasks(config.data);
  const tools = await loadTools(config.rollout.tools);
  await buildDemoModel(dir, demoSettings(config).model, {
    tasks,
    systemPrompt: config.data.system_prompt,
    tools: toolSpecs([...tools.values()]),
  });
  await tools.close();
  return dir;
}

function torchPeer(dir: string, batchFile: string, b: BenchSettings) {
  const threads = b.threads > 0 ? b.threads : navigator.hardwareConcurrency;
  return runJson(PYTHON, [
    join(ROOT, "bench", "peer_torch.py"),
    "--model",
    dir,
    "--batch",
    batchFile,
    "--threads",
    String(threads),
    "--steps",
    String(b.repeats),
  ]).catch((e) => ({ error: String(e) }));
}

interface BenchSettings {
  models: string[];
  batches: number[];
  prompt_tokens: number;
  decode_tokens: number;
  repeats: number;
  threads: number;
  gpu_models: string[];
  gpu_ep: "webgpu" | "cuda";
  gpu_compute: "float32" | "float16";
  gpu_batches: number[];
  gpu_train_tokens: number[];
  gpu_peak_tflops: number | null;
  gpu_gemm_tokens: number[];
  gpu_long_cache: number;
  demo_config: string;
  demo_seeds: number[];
  rounds: number;
}

/** `--only algorithms`'s own flags. */
interface AlgorithmFlags {
  tasks: string[];
  seeds: number;
  algorithms?: string[];
  overrides: Array<[string, string]>;
}

/** What the command line asks for. */
export interface BenchArgs {
  b: BenchSettings;
  only: Set<BenchSection>;
  before?: string;
  algorithms: AlgorithmFlags;
  /** `--only agent_seeds`: its configuration and seeds (null when not asked for). */
  agentSeeds: DemoSeedsPlan | null;
}

/** The command line: settings and sections, every mistake a one-line UserError before anything runs. */
export async function benchArgs(
  argv: string[],
): Promise<BenchArgs> {
  const { values, lists, overrides } = parseCommandLine(argv, {
    command: "deno task bench",
    string: ["models", "config", "before", "out", "tasks", "seeds", "algorithms"],
    boolean: ["debug"],
    multiple: ["only"],
  });
  const only = parseOnly(lists.only ?? []);
  // The algorithms section's overrides go to its runs (their own task configurations), not to bench.*.
  const own = only.has("algorithms") ? [] : overrides;
  const { config } = await loadConfig({ file: values.config as string | undefined, overrides: own });
  const b: BenchSettings = { ...config.bench, threads: config.model.threads };
  if (values.models) b.models = b.gpu_models = String(values.models).split(",");
  if (values.out) OUT = resolve(String(values.out));
  const algorithms: AlgorithmFlags = {
    tasks: values.tasks ? String(values.tasks).split(",").map((t) => resolve(t)) : defaultTaskConfigs(),
    seeds: values.seeds ? Number(values.seeds) : 3,
    algorithms: values.algorithms ? String(values.algorithms).split(",") : undefined,
    overrides: only.has("algorithms") ? overrides : [],
  };
  if (only.has("algorithms")) await checkAlgorithmFlags(algorithms);
  const agentSeeds = only.has("agent_seeds") ? await agentSeedsPlan(overrides) : null;
  const before = values.before as string | undefined;
  if (before !== undefined) await beforeCommits(ROOT, before);
  return { b, only, before, algorithms, agentSeeds };
}

/** `--seeds` a whole number from 1, `--algorithms` known names, every `--tasks` file a loadable config. */
async function checkAlgorithmFlags(a: AlgorithmFlags): Promise<void> {
  if (!Number.isInteger(a.seeds) || a.seeds < 1) {
    throw new UserError("deno task bench: --seeds", {
      value: a.seeds,
      why: "it must be a whole number, 1 or more",
      fix: "pass e.g. --seeds 3",
    });
  }
  const unknown = a.algorithms?.find((name) => !(name in ALGORITHMS));
  if (unknown !== undefined) {
    throw new UserError("deno task bench: --algorithms", {
      value: unknown,
      why: "no algorithm of the comparison has that name",
      fix: `use ${Object.keys(ALGORITHMS).join(", ")} (comma-separated)`,
    });
  }
  for (const task of a.tasks) await loadConfig({ file: task, overrides: a.overrides });
}

if (import.meta.main) {
  const { b, only, before, algorithms, agentSeeds } = await benchArgs(Deno.args).catch((e) =>
    Deno.exit(reportFailure("bench", e, Deno.args.includes("--debug")))
  );
  const want = (section: BenchSection) => only.has(section);
  await Deno.mkdir(OUT, { recursive: true });
  const started = new Date();
  const results: Record<string, unknown> = {
    date: started.toISOString(),
    command: `deno task bench ${Deno.args.join(" ")}`.trim(),
    settings: b,
  };
  results.machine = await machineLines();
  const files = new ResultsFiles(OUT, started, results, {
    models: b.models,
    gpuModels: b.gpu_models,
    before,
    want,
  });
  await files.save();
  const perModel = want("engine") || want("train") || want("weights") || want("rollout");
  for (const name of perModel ? b.models : []) {
    const dir = await modelDir(name);
    if (before && (want("engine") || want("train"))) {
      // The last round's "after" fills the usual tables; every round goes to the before/after tables.
      const rounds = await beforeAfterSection(name, dir, b, before, only);
      results[`before_after:${name}`] = rounds;
      const last = rounds.at(-1)!;
      if (last.engine) results[`engine:${name}`] = { ours: last.engine.after, peer: last.engine.peer };
      if (last.train) results[`train:${name}`] = { ours: last.train.after, peer: last.train.peer };
      await files.save();
    }
    if (want("engine") && !before) await files.record(`engine:${name}`, await engineSection(name, dir, b));
    if (want("train") && !before) await files.record(`train:${name}`, await trainSection(name, dir, b));
    if (want("weights")) await files.record(`weights:${name}`, await weightsSection(name, dir, b));
    if (want("rollout")) await files.record(`rollout:${name}`, await rolloutSection(name, dir, b));
  }
  if (want("loop")) await files.record("loop", await loopSection(b, before));
  if (want("algorithms")) {
    await files.record(
      "algorithms",
      await algorithmsSection({ ...algorithms, root: join(OUT, "algorithms") }),
    );
  }
  if (want("demo_seeds")) {
    await files.record("demo_seeds", await runDemoSeeds(b.demo_config, b.demo_seeds, OUT));
  }
  if (agentSeeds) {
    await files.record("agent_seeds", await runDemoSeeds(agentSeeds.config, agentSeeds.seeds, OUT));
  }
  for (const name of want("gpu") ? b.gpu_models : []) {
    const helpers = { runJson, denoScript, ROOT, OUT };
    const part = (value: unknown) => files.record(`gpu:${name}`, value);
    await part(await gpuSection(name, await modelDir(name), b, helpers, part));
  }
  if (want("score_mask")) {
    console.error("score + mask: 10,000 episodes x 2,000 tokens …");
    await files.record("score_mask", await denoScript("score_mask_bench.ts", ["--write"]));
  }
  const md = await files.save();
  console.log(md);
  console.error(`wrote ${files.md} and .json`);
}
