/**
 * The settings and metrics of training on one batch (step.ts, ppo_step.ts), in a file of their own so
 * that both import them without importing each other.
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import type { Aggregation } from "./batch.ts";
import { type OptimizerConfig, type ScheduleConfig, scheduledLr } from "./optimizer.ts";
import type { RolloutIs, RolloutIsStats } from "./rollout_is.ts";
import type { LossScalars } from "./trainer.ts";

/** PPO's schedule over a batch (the algorithm has a value head: mask.estimator gae). */
export interface PpoSettings {
  /** Epochs over the batch (`train.ppo_epochs`). */
  epochs: number;
  /** Episodes per optimizer step (`train.minibatch_episodes`). */
  minibatchEpisodes: number;
  /** Stop the remaining epochs once a minibatch's approx-KL exceeds 1.5 × this (null: never). */
  targetKl: number | null;
  /** The value head's peak learning rate (`train.value.lr`); the schedule scales it as the policy's. */
  valueLr: number;
}

/** The train settings a batch needs (`train` in config.yaml, plus the sampling temperature). */
export interface StepSettings {
  aggregation: Aggregation;
  maxResponseTokens: number;
  microBatchTokens: number;
  numIterations: number;
  /** The optimizer, its learning rate and gradient clipping (`train.optimizer`). */
  optimizer: OptimizerConfig;
  schedule: ScheduleConfig;
  /** Optimizer steps of the whole run, for the schedule. */
  totalSteps: number;
  /**
   * A learning rate for every optimizer step of this call instead of the schedule's: for a caller that
   * runs its own schedule one step per call (the demo's two-phase warm start, lib/demo/warm_start.ts).
   */
  lr?: number;
  scalars: LossScalars;
  /** Seed of the micro-batch order (and of PPO's minibatches). */
  seed: number;
  /**
   * The reference policy's adapter for the KL term (`train.loss.reference: initial`), fed at the adapter's
   * own scale; absent: the base model (the adapter switched off).
   */
  reference?: LoraWeights;
  /** Trainer-side old log-probs with this importance-sampling correction (absent: `none`). */
  rolloutIs?: RolloutIs;
  /** PPO's epochs and minibatches, for an algorithm with a value head (absent: GRPO's passes). */
  ppo?: PpoSettings;
  /** Called with each optimizer step's metrics as soon as the step finishes (progress lines). */
  onStep?: (metrics: StepMetrics) => void;
}

/** A PPO optimizer step's own metrics (metrics.arrow columns of the same names). */
export interface PpoMetrics {
  /** Σ weight · (value loss per token), before vf_coef. */
  value_loss: number;
  /** Mean over trained tokens of (r − 1) − log r, r = exp(lp − old): KL(rollout policy ‖ current). */
  approx_kl: number;
  /** 1 − Var(R − V) / Var(R) over the trained tokens (V before the step). */
  explained_var: number;
  /** Mean V over the trained tokens. */
  value_mean: number;
  /** The value head's gradient norm before clipping. */
  value_grad_norm: number;
  /** The epoch (1-based) the step belongs to. */
  epoch: number;
}

/** One metrics row (metrics.arrow). */
export interface StepMetrics {
  step: number;
  loss: number;
  pg_loss: number;
  kl: number;
  clip_frac: number;
  grad_norm: number;
  lr: number;
  tokens: number;
  seconds: number;
  entropy: number;
  /** With `rolloutIs`: the batch's train/inference mismatch (the same in every step of the batch). */
  rolloutIs?: RolloutIsStats;
  /** PPO's own metrics, for an algorithm with a value head. */
  ppo?: PpoMetrics;
}

/** The learning rate of optimizer step `step` (1-based): `s.lr` where given, else the schedule's. */
export function stepLr(s: StepSettings, step: number): number {
  return s.lr ?? scheduledLr(s.optimizer.lr, step, s.totalSteps, s.schedule);
}
