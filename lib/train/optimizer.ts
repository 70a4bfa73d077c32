/**
 * Optimizers over named float32 tensors (the LoRA A and B matrices), gradient-norm clipping and
 * learning-rate schedules. Updates are in float64 arithmetic per element, stored back as float32.
 *
 * - AdamW (Loshchilov & Hutter): bias-corrected first and second moments, decoupled weight decay
 *   `p -= lr · wd · p` applied before the Adam step, as `torch.optim.AdamW` does.
 * - SGD: `p -= lr · (g + wd · p)` (weight decay as L2, as `torch.optim.SGD`), no momentum.
 *
 * @module
 */

import { UserError } from "../errors.ts";

/** Named tensors: parameters, gradients, or optimizer moments. */
export type Tensors = Map<string, Float32Array>;

/** Optimizer settings (`train.optimizer` in config.yaml). */
export interface OptimizerConfig {
  name: "adamw" | "sgd";
  /** Peak learning rate (the schedule scales it per step). */
  lr: number;
  /** Clip the global gradient norm to this before the update; 0 = off. */
  max_grad_norm: number;
  betas: readonly number[];
  eps: number;
  weight_decay: number;
}

/** What a checkpoint stores to resume: moments and the number of steps taken. */
export interface OptimizerState {
  name: "adamw" | "sgd";
  /** Optimizer steps taken (the learning-rate schedule and the batch shuffles read it). */
  step: number;
  /**
   * Steps the moments have taken, AdamW's bias correction: `step` but where the moments started later (a
   * run resumed with another optimizer keeps its step and starts fresh moments, as a new torch optimizer
   * beside the old LR scheduler does).
   */
  momentSteps: number;
  m: Tensors;
  v: Tensors;
}

/** A fresh state for `params` (zero moments for AdamW). */
export function initOptimizerState(name: "adamw" | "sgd", params: Tensors): OptimizerState {
  const zeros = () => new Map([...params].map(([k, p]) => [k, new Float32Array(p.length)]));
  return {
    name,
    step: 0,
    momentSteps: 0,
    m: name === "adamw" ? zeros() : new Map(),
    v: name === "adamw" ? zeros() : new Map(),
  };
}

/**
 * The moments' steps an optimizer file records (`moment_steps`), else `step`: files written before the
 * two counts were kept apart have moments as old as their step.
 */
export function momentStepsOf(metadata: Readonly<Record<string, string>>, step: number): number {
  const saved = metadata.moment_steps;
  if (saved === undefined) return step;
  const n = Number(saved);
  if (!Number.isInteger(n) || n < 0 || n > step) {
    throw new UserError("optimizer state: moment_steps", {
      value: saved,
      why: `it must count the moments' steps, from 0 to the state's step ${step}`,
      fix: "restore the checkpoint from a good copy, or start from its adapter alone",
    });
  }
  return n;
}

/** The update rule's own settings (the learning rate comes per step, from the schedule). */
export type UpdateRule = Pick<OptimizerConfig, "name" | "betas" | "eps" | "weight_decay">;

/** How many optimizer steps have updated each parameter map in place, for caches of values derived from it. */
const revisions = new WeakMap<Tensors, number>();

/**
 * The number of `optimizerStep`s applied to `params` so far (0 for a map no step has touched): a value
 * derived from `params` at one revision holds until the next. The optimizer is the one code that writes into
 * parameters in place; a new adapter is a new map.
 */
export function paramsRevision(params: Tensors): number {
  return revisions.get(params) ?? 0;
}

/** Applies one step in place to `params` with learning rate `lr`; advances `state.step` and its moments'. */
export function optimizerStep(
  params: Tensors,
  grads: Tensors,
  state: OptimizerState,
  config: UpdateRule,
  lr: number,
): void {
  state.step += 1;
  state.momentSteps += 1;
  revisions.set(params, paramsRevision(params) + 1);
  for (const [name, p] of params) {
    const g = grads.get(name);
    if (!g) throw new Error(`optimizer: no gradient for ${name}`);
    if (config.name === "sgd") sgdUpdate(p, g, lr, config.weight_decay);
    else adamwUpdate(p, g, state.m.get(name)!, state.v.get(name)!, state.momentSteps, lr, config);
  }
}

function sgdUpdate(p: Float32Array, g: Float32Array, lr: number, wd: number): void {
  for (let i = 0; i < p.length; i++) p[i] -= lr * (g[i] + wd * p[i]);
}

function adamwUpdate(
  p: Float32Array,
  g: Float32Array,
  m: Float32Array,
  v: Float32Array,
  step: number,
  lr: number,
  config: UpdateRule,
): void {
  const [b1, b2] = config.betas;
  const c1 = 1 - b1 ** step, c2 = 1 - b2 ** step;
  const decay = 1 - lr * config.weight_decay;
  for (let i = 0; i < p.length; i++) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    const update = (m[i] / c1) / (Math.sqrt(v[i] / c2) + config.eps);
    p[i] = p[i] * decay - lr * update;
  }
}

/** The global L2 norm of all gradients. */
export function globalNorm(grads: Tensors): number {
  let sum = 0;
  for (const g of grads.values()) for (let i = 0; i < g.length; i++) sum += g[i] * g[i];
  return Math.sqrt(sum);
}

/**
 * Scales gradients in place so their global norm is at most `maxNorm` (0 = off), as
 * `torch.nn.utils.clip_grad_norm_` (factor `maxNorm / (norm + 1e-6)` when above). Returns the norm
 * before clipping.
 */
export function clipGradNorm(grads: Tensors, maxNorm: number): number {
  const norm = globalNorm(grads);
  if (maxNorm > 0 && norm > maxNorm) {
    const factor = maxNorm / (norm + 1e-6);
    for (const g of grads.values()) for (let i = 0; i < g.length; i++) g[i] *= factor;
  }
  return norm;
}

/** Schedule settings (`train.schedule`). */
export interface ScheduleConfig {
  name: "constant" | "cosine" | "linear";
  warmup_steps: number;
  min_lr_ratio: number;
}

/**
 * Learning rate of optimizer step `step` (1-based) out of `total`: linear warm-up from 0 over
 * `warmup_steps` (step k gets `lr · k / warmup`), then constant, or a cosine / linear decay from `lr`
 * to `lr · min_lr_ratio` at the last step.
 */
export function scheduledLr(peak: number, step: number, total: number, s: ScheduleConfig): number {
  if (step <= s.warmup_steps) return (peak * step) / Math.max(1, s.warmup_steps);
  if (s.name === "constant") return peak;
  const span = Math.max(1, total - s.warmup_steps);
  const progress = Math.min(1, (step - s.warmup_steps) / span);
  const floor = peak * s.min_lr_ratio;
  const shape = s.name === "cosine" ? 0.5 * (1 + Math.cos(Math.PI * progress)) : 1 - progress;
  return floor + (peak - floor) * shape;
}
