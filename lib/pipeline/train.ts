/**
 * The train stage: `train.num_iterations` optimizer steps of the session's adapter on a batch table,
 * with the trainer the session opened once (the train graph and its onnxruntime session are built once
 * per run, not per step: lib/train/train_session.ts). The adapter and optimizer state change in memory;
 * the output carries the metrics table (one row per optimizer step) and the checkpoint that
 * `writeStageOutput` writes as one directory (PEFT adapter, optimizer state, metrics.arrow).
 *
 * The batch is checked whole (per-token lists, prompt_len, token ids against the model's vocabulary)
 * before the trainer opens, so a bad batch never waits for a model load (lib/train/episodes.ts).
 *
 * @module
 */

import { resolve } from "node:path";
import type { ColumnInput } from "../arrow/build.ts";
import { buildTable } from "../arrow/write.ts";
import type { Config } from "../config/schema.ts";
import { UserError } from "../errors.ts";
import { adapterId } from "../model/adapter_id.ts";
import { readQwen3Config } from "../model/hf_config.ts";
import { episodesOf, samplingTemperature } from "../train/episodes.ts";
import type { LossScalars } from "../train/trainer.ts";
import { type PpoSettings, type StepMetrics, type StepSettings, trainOnBatch } from "../train/step.ts";
import { algorithmOf, policyLossOf, tokenInputsOf } from "../train/algorithm.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import { type CheckpointOutput, stageFileOf, type StageInput } from "./output.ts";
import type { Session } from "./session.ts";

export interface TrainRequest {
  step: number;
  /** The batch rows to train on (default all): the demo's warm start takes a few traces per step. */
  rows?: readonly number[];
  /** Called with each optimizer step's metrics as soon as it finishes. */
  onStep?: (metrics: StepMetrics) => void;
  /** The learning rate of every step of this call instead of the schedule's (`StepSettings.lr`). */
  lr?: number;
}

export interface TrainSummary {
  metrics: StepMetrics[];
  /** Identity of the trained adapter (as rollouts record it). */
  adapterId: string;
}

/** Trains the session's adapter on `batch`. */
export async function train(
  session: Session,
  batch: StageInput,
  request: TrainRequest,
): Promise<CheckpointOutput<TrainSummary>> {
  const { config } = session;
  const file = stageFileOf(batch, "batch");
  const vocabSize = (await readQwen3Config(resolve(config.model.path))).vocab_size;
  const inputs = tokenInputsOf(algorithmOf(config));
  const episodes = episodesOf(file, { inputs, vocabSize, rows: checkedRows(file, request.rows) });
  const ts = await session.trainer();
  const { adapter, optimizer, value } = ts.checkpoint;
  const metrics = await trainOnBatch(ts.trainer, episodes, adapter.weights, optimizer, {
    ...stepSettingsOf(config, file),
    ...(ts.reference ? { reference: ts.reference } : {}),
    onStep: request.onStep,
    ...(request.lr === undefined ? {} : { lr: request.lr }),
  }, value);
  const id = await adapterId(adapter, ts.model.config);
  const table = buildTable("(metrics)", "metrics", metricsColumns(metrics), {
    config_hash: session.configHash,
    input_hashes: { batch: file.sha256 },
    model: ts.model.dir,
    adapter: id,
    seed: config.train.seed,
  });
  return {
    kind: "metrics",
    table,
    summary: { metrics, adapterId: id },
    checkpoint: {
      state: ts.checkpoint,
      modelConfig: ts.model.config,
      baseModel: ts.model.dir,
      baseConfigSha256: ts.baseConfigSha256,
      configHash: session.configHash,
    },
  };
}

/** The train settings of one batch: the one place config maps to the trainer's options. */
export function stepSettingsOf(config: Config, batch: StageFile): StepSettings {
  const { train: c, rollout, loop } = config;
  const algorithm = algorithmOf(config);
  const readsOld = policyLossOf(algorithm).readsOldLogprobs;
  const ppo = algorithm.valueLoss ? ppoSettingsOf(config) : undefined;
  return {
    aggregation: c.loss.aggregation,
    maxResponseTokens: c.loss.max_response_tokens ?? rollout.generation.max_total_tokens,
    microBatchTokens: c.micro_batch_tokens,
    numIterations: c.num_iterations,
    optimizer: c.optimizer,
    schedule: c.schedule,
    totalSteps: loop.steps * (ppo ? ppoStepsPerBatch(config) : c.num_iterations),
    scalars: {
      ...trainScalarsOf(config),
      temperature: samplingTemperature(batch, rollout.generation.temperature),
    },
    seed: c.seed,
    ...(ppo ? { ppo } : {}),
    rolloutIs: c.loss.rollout_is === "none" || !readsOld
      ? undefined
      : { mode: c.loss.rollout_is, level: c.loss.rollout_is_level, cap: c.loss.rollout_is_cap },
  };
}

/** The loss scalars of `train` (the temperature is the batch's: its sampling temperature). */
export function trainScalarsOf(config: Config): LossScalars {
  const { train: c } = config;
  const spec = algorithmOf(config);
  const valueHead = spec.valueLoss !== undefined;
  const declared = policyLossOf(spec).scalars.map(({ key }) => [key, lossScalar(config, key)]);
  return {
    temperature: config.rollout.generation.temperature,
    epsLow: c.loss.eps_low,
    epsHigh: c.loss.eps_high,
    beta: c.loss.beta,
    loss: Object.fromEntries(declared),
    ...(valueHead ? { vfCoef: c.value.vf_coef, valueClip: c.value.clip ?? 0 } : {}),
  };
}

/** PPO's epochs and minibatches (`train.ppo_epochs`, `minibatch_episodes`, `target_kl`, `value.lr`). */
function ppoSettingsOf(config: Config): PpoSettings {
  const { train: c } = config;
  return {
    epochs: c.ppo_epochs,
    minibatchEpisodes: c.minibatch_episodes,
    targetKl: c.target_kl,
    valueLr: c.value.lr,
  };
}

/** PPO's optimizer steps per loop step (without an early stop), for the learning-rate schedule. */
function ppoStepsPerBatch(config: Config): number {
  const episodes = config.rollout.tasks_per_step * config.rollout.group_size;
  return config.train.ppo_epochs * Math.ceil(episodes / config.train.minibatch_episodes);
}

/** The rows asked for, each a row of `file` (all rows when none are given). */
export function checkedRows(file: StageFile, rows: readonly number[] | undefined): number[] | undefined {
  // The index, not the value: an undefined row must be refused too (find would return it as "none").
  const at = rows?.findIndex((r) => !Number.isInteger(r) || r < 0 || r >= file.rows) ?? -1;
  if (at >= 0) {
    throw new UserError(`train: row ${rows![at]} (rows[${at}]) of ${file.path}`, {
      why: `the batch has rows 0 to ${file.rows - 1}`,
      fix: "pass rows of the batch",
    });
  }
  return rows ? [...rows] : undefined;
}

/** metrics.arrow's columns, one row per optimizer step. */
function metricsColumns(rows: StepMetrics[]): Record<string, ColumnInput> {
  const column = <K extends keyof StepMetrics>(k: K) => rows.map((r) => r[k] as number);
  return {
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
    ...ppoColumns(rows),
  };
}

/** With a value head (PPO): value_loss, approx_kl, explained_var, value_mean, value_grad_norm, epoch. */
function ppoColumns(rows: StepMetrics[]): Record<string, Float64Array> {
  if (!rows.some((r) => r.ppo)) return {};
  const keys = [
    "value_loss",
    "approx_kl",
    "explained_var",
    "value_mean",
    "value_grad_norm",
    "epoch",
  ] as const;
  return Object.fromEntries(keys.map((k) => [k, Float64Array.from(rows, (r) => r.ppo?.[k] ?? NaN)]));
}

/** With train.loss.rollout_is on: `rollout_logprob_diff`, `rollout_kl`, `rollout_is_clip_frac` (rollout_is.ts). */
function mismatchColumns(rows: StepMetrics[]): Record<string, Float64Array> {
  if (!rows.some((r) => r.rolloutIs)) return {};
  return {
    rollout_logprob_diff: Float64Array.from(rows, (r) => r.rolloutIs?.rollout_logprob_diff ?? NaN),
    rollout_kl: Float64Array.from(rows, (r) => r.rolloutIs?.rollout_kl ?? NaN),
    rollout_is_clip_frac: Float64Array.from(rows, (r) => r.rolloutIs?.rollout_is_clip_frac ?? NaN),
  };
}

/** One optimizer step's numbers, as progress lines show them. */
export function stepLine(m: StepMetrics): string {
  const mismatch = m.rolloutIs
    ? ` |Δ old| ${m.rolloutIs.rollout_logprob_diff.toExponential(2)} kl ${
      m.rolloutIs.rollout_kl.toExponential(2)
    } is_clip ${m.rolloutIs.rollout_is_clip_frac.toFixed(3)}`
    : "";
  const ppo = m.ppo
    ? ` | epoch ${m.ppo.epoch} vloss ${m.ppo.value_loss.toFixed(4)} approx_kl ${
      m.ppo.approx_kl.toExponential(2)
    } ` +
      `ev ${m.ppo.explained_var.toFixed(3)}`
    : "";
  return `loss ${m.loss.toFixed(5)} kl ${m.kl.toFixed(5)} clip ${m.clip_frac.toFixed(3)} ` +
    `grad_norm ${m.grad_norm.toFixed(4)} lr ${m.lr.toExponential(2)} tokens ${m.tokens} ${
      m.seconds.toFixed(1)
    }s${mismatch}${ppo}`;
}

/** `train.loss.<key>`, a scalar a loss declares (config checked it against the declaration). */
function lossScalar(config: Config, key: string): number {
  return (config.train.loss as unknown as Readonly<Record<string, number>>)[key];
}
