/** Schema of the `train` section: LoRA, optimizer, schedule, loss (see schema.ts). */
import { bool, choice, type Field, float, int, listOf, subset } from "../fields.ts";
import { eachPolicyLoss, POLICY_LOSS_NAMES } from "../../losses/registry.ts";
import { BETA, EPS_HIGH, EPS_LOW } from "../../losses/objective.ts";
import { MAX_CONTEXT } from "./run.ts";

export const LORA_TARGETS = ["q", "k", "v", "o", "gate", "up", "down"] as const;
export const OPTIMIZERS = ["adamw", "sgd"] as const;
export const SCHEDULES = ["constant", "cosine", "linear"] as const;
/** What `train.loss.beta`'s KL term compares the policy with. */
export const REFERENCES = ["base", "initial"] as const;
export const AGGREGATIONS = ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"] as const;
/** Policy losses: the names registered in lib/losses/registry.ts (a live list: a loss registered later is a choice). */
export const OBJECTIVES: readonly string[] = POLICY_LOSS_NAMES;
export const ROLLOUT_IS = ["none", "truncate", "mask"] as const;
export const ROLLOUT_IS_LEVELS = ["token", "sequence"] as const;

const lora = {
  r: int({ default: 16, min: 1, max: 4096, doc: "LoRA rank" }),
  alpha: float({
    default: 32,
    min: 0,
    minOpen: true,
    doc: "LoRA alpha; the update is scaled by alpha / r (alpha / sqrt(r) with rslora)",
  }),
  dropout: float({
    default: 0,
    min: 0,
    max: 0,
    doc: "LoRA dropout; must be 0 so that log-probs are exact and repeatable",
  }),
  targets: subset({
    choices: LORA_TARGETS,
    default: ["q", "k", "v", "o", "gate", "up", "down"],
    minItems: 1,
    doc: "projections that get adapters",
  }),
  rslora: bool({ default: false, doc: "rank-stabilized LoRA scaling (alpha / sqrt(r))" }),
};

const optimizer = {
  name: choice({
    choices: OPTIMIZERS,
    default: "adamw",
    doc: "optimizer (adamw: bias-corrected, decoupled weight decay)",
  }),
  lr: float({ default: 5e-5, min: 0, minOpen: true, max: 10, doc: "peak learning rate" }),
  betas: listOf<number>({
    item: { kind: "float", min: 0, max: 1, maxOpen: true },
    default: [0.9, 0.999],
    minItems: 2,
    maxItems: 2,
    doc: "adamw beta1, beta2",
  }),
  eps: float({ default: 1e-8, min: 0, minOpen: true, max: 1, doc: "adamw epsilon" }),
  weight_decay: float({ default: 0.0, min: 0, max: 1, doc: "decoupled weight decay (adamw) or L2 (sgd)" }),
  max_grad_norm: float({ default: 1.0, min: 0, doc: "clip the global gradient norm to this; 0 = off" }),
};

const schedule = {
  name: choice({
    choices: SCHEDULES,
    default: "constant",
    doc: "learning-rate schedule after warm-up, over loop.steps optimizer steps",
  }),
  warmup_steps: int({
    default: 0,
    min: 0,
    doc: "linear warm-up from 0 to lr over this many optimizer steps",
  }),
  min_lr_ratio: float({ default: 0.0, min: 0, max: 1, doc: "cosine / linear decay ends at lr x this" }),
};

const loss = {
  objective: choice({
    choices: OBJECTIVES,
    default: "clipped",
    doc: "the policy loss: clipped (PPO's clipped surrogate, GRPO and its relatives) | sft " +
      "(negative log-likelihood of the masked tokens, a supervised warm start) | gspo (GSPO-token: the " +
      "clip on the length-normalised sequence ratio; set eps_low 3e-4, eps_high 4e-4) | cispo (REINFORCE " +
      "weighted by the clipped, detached ratio); docs/algorithms.md",
  }),
  aggregation: choice({
    choices: AGGREGATIONS,
    default: "token_mean",
    doc: "how token losses become the batch loss (see docs/DESIGN.md)",
    retired: {
      sft: "set train.loss.objective: sft and train.loss.aggregation: token_mean (sft is an objective now)",
    },
  }),
  // The clip family's scalars, declared by the losses that read them (lib/losses/objective.ts).
  eps_low: float(EPS_LOW),
  eps_high: float(EPS_HIGH),
  beta: float(BETA),
  reference: choice({
    choices: REFERENCES,
    default: "base",
    doc: "the policy beta's KL term holds the model to: base (the base model, adapter off; TRL and verl " +
      "with a LoRA adapter) | initial (the adapter the run started from, model.adapter: the SFT policy of " +
      "InstructGPT's KL; the base model when model.adapter is null)",
  }),
  max_response_tokens: int({
    default: null,
    nullable: true,
    min: 1,
    max: MAX_CONTEXT,
    doc: "seq_mean_token_sum_norm divisor; null = rollout.generation.max_total_tokens",
  }),
  rollout_is: choice({
    choices: ROLLOUT_IS,
    default: "mask",
    doc: "sampler-trainer correction: the trainer recomputes the old log-probs and weights each token by " +
      "rho = exp(old_trainer - old_rollout) (per token, or per episode: rollout_is_level): none (use the " +
      "rollout's) | truncate (min(rho, cap), TIS) | mask (drop rho > cap); bit-identical to none when they " +
      "agree; see docs/algorithms.md",
  }),
  rollout_is_level: choice({
    choices: ROLLOUT_IS_LEVELS,
    default: "sequence",
    doc:
      "rho of rollout_is: token (each token's own) | sequence (exp of the sum over the episode's trained " +
      "tokens, TRL's default sequence_mask)",
  }),
  rollout_is_cap: float({
    default: 3.0,
    min: 1,
    doc: "C, the largest importance weight rho kept by rollout_is (TRL's default 3)",
  }),
};

/**
 * Every scalar a registered loss declares is a `train.loss` key with the loss's range, default and doc;
 * those of a loss registered after this module loaded are added then (a loss in a test, a plug-in).
 */
eachPolicyLoss(({ scalars }) => {
  const section = loss as unknown as Record<string, Field<unknown>>;
  for (const scalar of scalars) section[scalar.key] ??= float(scalar);
});

/** PPO's value head (mask.estimator gae): lib/train/value_head.ts. */
const value = {
  lr: float({
    default: 1e-4,
    min: 0,
    minOpen: true,
    max: 10,
    doc: "value head's peak learning rate (its own optimizer, same kind and schedule; seed 002: 1e-4)",
  }),
  vf_coef: float({ default: 0.5, min: 0, doc: "weight of the value loss in the total loss (seed 002: 0.5)" }),
  clip: float({
    default: null,
    nullable: true,
    min: 0,
    minOpen: true,
    doc: "clip the value's change from the rollout's value to +-this in the value loss; null = plain " +
      "squared error (seed 002's default)",
  }),
};

export const train = {
  lora,
  optimizer,
  schedule,
  loss,
  value,
  ppo_epochs: int({
    default: 4,
    min: 1,
    max: 64,
    doc: "PPO (mask.estimator gae): epochs over each batch, in shuffled minibatches (seed 002: 4)",
  }),
  minibatch_episodes: int({
    default: 32,
    min: 1,
    doc: "PPO: episodes per optimizer step within an epoch (the last minibatch may be smaller)",
  }),
  target_kl: float({
    default: null,
    nullable: true,
    min: 0,
    minOpen: true,
    doc: "PPO: stop the batch's remaining epochs once a minibatch's approx-KL to the rollout policy " +
      "exceeds 1.5 x this (before its step); null = never",
  }),
  micro_batch_tokens: int({
    default: 4096,
    min: 16,
    doc: "token budget of one forward + backward; gradients accumulate over micro-batches",
  }),
  num_iterations: int({
    default: 1,
    min: 1,
    max: 64,
    doc: "optimizer passes over one batch, old log-probs held fixed (GRPO's mu)",
  }),
  seed: int({ default: 0, min: 0, doc: "seed for LoRA initialization and micro-batch order" }),
};
