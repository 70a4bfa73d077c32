/**
 * The algorithm record the trainer is built from: the policy loss picked by `train.loss.objective`
 * (lib/losses/registry.ts), whether its KL term is on, and the heads the advantage estimator declares
 * (`mask.estimator`'s `needs.heads`: gae declares the value head, value_head.ts, with its loss variant
 * picked by `train.value.clip`). It says which per-token inputs the train graph takes, in graph-input
 * order; the batch builder (episodes.ts), the micro-batches (batch.ts), the train graph
 * (train_graph.ts), the trainer's feeds (trainer.ts) and the checkpoint all follow it.
 *
 * A loss that trains the language model alone (`sft`, the supervised warm start) takes no head: a warm
 * start under a PPO config trains no value head, and the PPO run starts one fresh.
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { ESTIMATOR_REGISTRY } from "../advantages/registry.ts";
import type { PolicyLoss, TokenInput } from "../losses/types.ts";
import { policyLossNamed } from "../losses/registry.ts";
import { VALUE_LOSSES, type ValueLoss } from "./value_head.ts";

/** What decides the train graph's per-token inputs and heads. */
export interface AlgorithmSpec {
  /** `train.loss.objective`: a name registered in lib/losses/registry.ts. */
  objective: string;
  /** Whether the loss has its KL term (train.loss.beta > 0): the reference input and pass. */
  withReference: boolean;
  /** The value head's loss variant, or absent for no value head. */
  valueLoss?: ValueLoss["name"];
}

/** The algorithm of a configuration: `train.loss`, `train.value.clip` and `mask.estimator`'s heads. */
export function algorithmOf(config: Pick<Config, "train" | "mask">): AlgorithmSpec {
  const { train, mask } = config;
  const loss = policyLossNamed(train.loss.objective);
  const heads = loss.takesHeads ? ESTIMATOR_REGISTRY[mask.estimator].needs.heads ?? [] : [];
  return {
    objective: train.loss.objective,
    withReference: train.loss.beta > 0,
    ...(heads.includes("value") ? { valueLoss: train.value.clip === null ? "squared" : "clipped" } : {}),
  };
}

/** The policy loss of `spec`. */
export function policyLossOf(spec: AlgorithmSpec): PolicyLoss {
  return policyLossNamed(spec.objective);
}

/** The value loss of `spec`, when it has a value head. */
export function valueLossOf(spec: AlgorithmSpec): ValueLoss | undefined {
  return spec.valueLoss ? VALUE_LOSSES[spec.valueLoss] : undefined;
}

/** The reference input of `spec`, when its loss has a KL term and it is on. */
export function referenceInputOf(spec: AlgorithmSpec): TokenInput | undefined {
  return spec.withReference ? policyLossOf(spec).reference : undefined;
}

/** Every per-token input of the train graph of `spec`, in graph-input order. */
export function tokenInputsOf(spec: AlgorithmSpec): TokenInput[] {
  const reference = referenceInputOf(spec);
  return [
    ...policyLossOf(spec).inputs,
    ...(reference ? [reference] : []),
    ...(valueLossOf(spec)?.inputs ?? []),
  ];
}
