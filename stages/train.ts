/**
 * `deno task train`: trains the LoRA adapter on batch.arrow and writes a checkpoint directory: a PEFT
 * adapter (adapter_config.json, adapter_model.safetensors), the optimizer state and step for resuming,
 * and metrics.arrow (one row per optimizer step).
 *
 *   deno task train --in runs/x/batch.arrow --out runs/x/adapter [--adapter runs/x/prev] [--train.k=v …]
 *
 * Without an adapter (`model.adapter`, or its flag `--adapter`), LoRA starts as PEFT starts it
 * (A Kaiming-uniform, B = 0, seeded by train.seed). With one, the adapter and (when saved by this stage
 * with the same optimizer) the optimizer state continue; its rank, alpha, rsLoRA and targets must equal
 * train.lora, and a checkpoint saved on another base model is refused — both before the model loads.
 *
 * The stage is a pure function over the batch (`train`, exported from mod.ts) plus a thin `main`.
 *
 * `--in` may repeat or be a quoted glob: the batch files (e.g. rollout shards of one step) are read as one,
 * concatenated in the order given, after checking they come from one policy version and configuration
 * (lib/arrow/merge.ts, docs/serving.md "Shards").
 */

import { join, resolve } from "node:path";
import { readStageFiles } from "../lib/arrow/merge.ts";
import type { StageFile } from "../lib/arrow/stage_file.ts";
import { writeStageFile } from "../lib/arrow/write.ts";
import type { Config, ModelConfig, TrainConfig } from "../lib/config/schema.ts";
import { UserError } from "../lib/errors.ts";
import { adapterId } from "../lib/model/adapter_id.ts";
import { checkFreeSpace } from "../lib/fs/disk_space.ts";
import { checkOutputPath } from "../lib/fs/output.ts";
import { readQwen3Config } from "../lib/model/hf_config.ts";
import { type Adapter, initLoraWeights, type LoraSpec } from "../lib/model/lora.ts";
import { openModelDir } from "../lib/model/model_dir.ts";
import { ADAPTER_CONFIG, parseAdapterConfig } from "../lib/model/peft.ts";
import { sha256Hex } from "../lib/fs/sha256.ts";
import { checkAdapterDir, checkModelDir } from "../lib/cli/check.ts";
import { runStageMain } from "../lib/cli/cli.ts";
import { type Progress, progress as stderrProgress } from "../lib/progress.ts";
import {
  type Checkpoint,
  checkpointBytes,
  loadCheckpoint,
  loraDifferences,
  saveCheckpoint,
  STATE_FILE,
} from "../lib/train/checkpoint.ts";
import { episodesOf, samplingTemperature } from "../lib/train/episodes.ts";
import { initOptimizerState } from "../lib/train/optimizer.ts";
import { type StepMetrics, trainOnBatch } from "../lib/train/step.ts";
import { Trainer } from "../lib/train/trainer.ts";

/** What `train` needs: its own config section, the model section, and three values from the run. */
export interface TrainOptions {
  /** model.path, model.adapter (the adapter to continue, or null), ep, threads. */
  model: ModelConfig;
  train: TrainConfig;
  /** The checkpoint directory to write. */
  out: string;
  /** Hash of the resolved configuration, recorded in the checkpoint and metrics.arrow. */
  configHash: string;
  /** Sampling temperature when the batch does not record one (rollout.generation.temperature). */
  temperature: number;
  /** Dr. GRPO's response-token normaliser when train.loss.max_response_tokens is null. */
  maxResponseTokens: number;
  /** Optimizer steps of the whole run, for the learning-rate schedule. */
  totalSteps: number;
  /** Replace an existing checkpoint of ours at `out` (`--overwrite`). */
  overwrite?: boolean;
  /** Where progress lines go (default stderr). */
  progress?: Progress;
}

/** What `train` produced. */
export interface TrainResult {
  /** The checkpoint directory written. */
  out: string;
  metrics: StepMetrics[];
  /** Identity of the trained adapter (as rollouts record it). */
  adapterId: string;
}

/** The options of `train` from a whole configuration (what the stage main and the demo use). */
export function trainOptionsOf(
  config: Config,
  configHash: string,
  out: string,
  extra: Pick<TrainOptions, "overwrite" | "progress"> = {},
): TrainOptions {
  return {
    model: config.model,
    train: config.train,
    out,
    configHash,
    temperature: config.rollout.generation.temperature,
    maxResponseTokens: config.rollout.generation.max_total_tokens,
    totalSteps: config.loop.steps * config.train.num_iterations,
    ...extra,
  };
}

/** Trains on `batch` (a batch stage file) and writes the checkpoint `options.out`. */
export async function train(batch: StageFile, options: TrainOptions): Promise<TrainResult> {
  const { model: m, train: c } = options;
  const log = options.progress ?? stderrProgress;
  const spec: LoraSpec = {
    r: c.lora.r,
    alpha: c.lora.alpha,
    rslora: c.lora.rslora,
    targets: [...c.lora.targets],
  };
  await checkBeforeWork(batch.path, options, spec);
  // The batch whole, then room for the checkpoint: both known before the model loads.
  const modelConfig = await readQwen3Config(resolve(m.path));
  const episodes = episodesOf(batch, modelConfig.vocab_size);
  checkFreeSpace(options.out, checkpointBytes(modelConfig, spec, c.optimizer.name, c.num_iterations));
  const loading = log.start("train: loading the model");
  const model = await openModelDir(m.path);
  const baseConfigSha256 = await sha256Hex(await Deno.readFile(join(model.dir, "config.json")));
  const start = await startingPoint(m.adapter, model.config, spec, c);
  const trainer = await Trainer.create(model, {
    lora: spec,
    objective: c.loss.aggregation === "sft" ? "sft" : "grpo",
    withReference: c.loss.beta > 0,
    ep: m.ep,
  }, { threads: m.threads });
  loading.done(`${model.dir} (${model.config.num_hidden_layers} layers), ${batch.rows} episodes`);
  const steps = log.start("train: steps", c.num_iterations);
  let metrics: StepMetrics[];
  try {
    metrics = await trainOnBatch(trainer, episodes, start.adapter.weights, start.optimizer, {
      aggregation: c.loss.aggregation,
      maxResponseTokens: c.loss.max_response_tokens ?? options.maxResponseTokens,
      microBatchTokens: c.micro_batch_tokens,
      numIterations: c.num_iterations,
      optimizer: c.optimizer,
      lr: c.optimizer.lr,
      maxGradNorm: c.optimizer.max_grad_norm,
      schedule: c.schedule,
      totalSteps: options.totalSteps,
      scalars: {
        temperature: samplingTemperature(batch, options.temperature),
        epsLow: c.loss.eps_low,
        epsHigh: c.loss.eps_high,
        beta: c.loss.beta,
      },
      seed: c.seed,
      rolloutIs: c.loss.rollout_is === "none" || c.loss.aggregation === "sft"
        ? undefined
        : { mode: c.loss.rollout_is, cap: c.loss.rollout_is_cap },
      onStep: (row) => steps.tick(1, stepLine(row)),
    });
  } finally {
    await trainer.close();
  }
  steps.done(
    `${metrics.length} optimizer steps, loss ${metrics[0]?.loss.toFixed(5)} → ${
      metrics.at(-1)?.loss.toFixed(5)
    }`,
  );
  const writing = log.start("train: writing the checkpoint");
  const id = await adapterId(start.adapter, model.config);
  const out = resolve(options.out);
  await saveCheckpoint(
    out,
    start,
    model.config,
    { baseModel: model.dir, baseConfigSha256, configHash: options.configHash },
    (tmp) =>
      writeMetrics(join(tmp, "metrics.arrow"), metrics, {
        config_hash: options.configHash,
        input_hashes: { batch: batch.sha256 },
        model: model.dir,
        adapter: id,
        seed: c.seed,
      }),
  );
  writing.done(out);
  return { out, metrics, adapterId: id };
}

/** One optimizer step's numbers, as its progress line shows them after `train: steps k/n`. */
export function stepLine(m: StepMetrics): string {
  const mismatch = m.rolloutIs
    ? ` |Δ old| ${m.rolloutIs.rollout_logprob_diff.toExponential(2)} is_clip ${
      m.rolloutIs.rollout_is_clip_frac.toFixed(3)
    }`
    : "";
  return `loss ${m.loss.toFixed(5)} kl ${m.kl.toFixed(5)} clip ${m.clip_frac.toFixed(3)} ` +
    `grad_norm ${m.grad_norm.toFixed(4)} lr ${m.lr.toExponential(2)} tokens ${m.tokens} ${
      m.seconds.toFixed(1)
    }s${mismatch}`;
}

/** Output path, model directory, adapter shape and base model: all checked before the model loads. */
async function checkBeforeWork(batchPath: string, options: TrainOptions, spec: LoraSpec): Promise<void> {
  const { model } = options;
  await checkOutputPath(options.out, { kind: "adapter-dir" }, {
    inputs: [batchPath, model.path, model.adapter],
    overwrite: options.overwrite,
  });
  await checkModelDir("model.path", model.path);
  if (!model.adapter) return;
  await checkAdapterDir("model.adapter", model.adapter);
  const path = join(model.adapter, ADAPTER_CONFIG);
  const saved = parseAdapterConfig(JSON.parse(await Deno.readTextFile(path)), path);
  const differences = loraDifferences(saved, spec);
  if (differences.length > 0) {
    throw new UserError(`train: adapter ${model.adapter}`, {
      value: differences.join(", "),
      why: "its LoRA shape differs from train.lora",
      fix: "set train.lora (e.g. --train.lora.r=N) to the adapter's values, or start without an adapter",
    });
  }
  await checkSameBase(model.adapter, model.path);
}

/** Refuses to continue a checkpoint saved on another base model (its config.json differs). */
async function checkSameBase(adapter: string, modelPath: string): Promise<void> {
  let state: { base_config_sha256?: string; base_model?: string };
  try {
    state = JSON.parse(await Deno.readTextFile(join(adapter, STATE_FILE)));
  } catch {
    return; // a plain PEFT adapter: nothing recorded to compare
  }
  const sha256 = await sha256Hex(await Deno.readFile(join(modelPath, "config.json")));
  const saved = state.base_config_sha256;
  if (saved && saved !== sha256) {
    throw new UserError(`train: the adapter checkpoint's base model`, {
      value: state.base_model,
      why: `it was trained on another base model (config.json sha256 ${
        saved.slice(0, 12)
      }…, ${modelPath} has ${sha256.slice(0, 12)}…)`,
      fix: "set model.path to the base model the adapter was trained on, or start without an adapter",
    });
  }
}

/** A fresh adapter (PEFT init) or the checkpoint at `dir` (its shape already checked). */
async function startingPoint(
  dir: string | null,
  cfg: Awaited<ReturnType<typeof openModelDir>>["config"],
  spec: LoraSpec,
  c: TrainConfig,
): Promise<Checkpoint> {
  if (!dir) {
    const adapter: Adapter = { spec, weights: initLoraWeights(cfg, spec, c.seed) };
    return { adapter, optimizer: initOptimizerState(c.optimizer.name, adapter.weights) };
  }
  return await loadCheckpoint(dir, cfg, c.optimizer.name);
}

async function writeMetrics(
  path: string,
  rows: StepMetrics[],
  metadata: Parameters<typeof writeStageFile>[3],
): Promise<void> {
  const column = <K extends keyof StepMetrics>(k: K) => rows.map((r) => r[k]);
  await writeStageFile(path, "metrics", {
    step: Int32Array.from(column("step")),
    loss: Float64Array.from(column("loss")),
    pg_loss: Float64Array.from(column("pg_loss")),
    kl: Float64Array.from(column("kl")),
    clip_frac: Float64Array.from(column("clip_frac")),
    grad_norm: Float64Array.from(column("grad_norm")),
    lr: Float64Array.from(column("lr")),
    tokens: Int32Array.from(column("tokens")),
    seconds: Float64Array.from(column("seconds")),
    entropy: Float64Array.from(column("entropy")),
    ...mismatchColumns(rows),
  }, metadata);
}

/** With train.loss.rollout_is on: `rollout_logprob_diff` and `rollout_is_clip_frac` (rollout_is.ts). */
function mismatchColumns(rows: StepMetrics[]): Record<string, Float64Array> {
  if (!rows.some((r) => r.rolloutIs)) return {};
  return {
    rollout_logprob_diff: Float64Array.from(rows, (r) => r.rolloutIs?.rollout_logprob_diff ?? NaN),
    rollout_is_clip_frac: Float64Array.from(rows, (r) => r.rolloutIs?.rollout_is_clip_frac ?? NaN),
  };
}

if (import.meta.main) {
  await runStageMain({
    name: "train",
    summary:
      "Trains the LoRA adapter on batch.arrow; writes a checkpoint directory (PEFT adapter, optimizer state, metrics.arrow).",
    needsInput: true,
    manyInputs: true,
    needsOutput: true,
    input: "batch",
    output: { kind: "adapter-dir" },
    usesModel: true,
    configFlags: { adapter: "model.adapter" },
    flagHelp: [
      "--adapter DIR    checkpoint or PEFT adapter to continue from: the same as --model.adapter=DIR",
    ],
    examples: [
      "deno task train --in runs/x/batch.arrow --out runs/x/adapter",
      "deno task train --in runs/x/batch.arrow --out runs/x/adapter2 --adapter runs/x/adapter --train.loss.beta=0.04",
      "deno task train --in runs/x/batch.arrow --out runs/x/adapter --overwrite --train.lora.targets=[q,v]",
    ],
    run: async (args) => {
      const batch = await readStageFiles(args.inputs, "batch");
      const options = trainOptionsOf(args.config, args.configHash, args.output!, {
        overwrite: args.overwrite,
      });
      const result = await train(batch, options);
      console.log(`wrote ${result.out} (${result.adapterId})`);
    },
  });
}
