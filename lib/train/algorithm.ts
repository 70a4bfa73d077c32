/**
 * The algorithm record the trainer is built from: the policy loss picked by `train.loss.objective`
 * (objective.ts) and whether its KL term is on. It says which per-token inputs the train graph takes,
 * in graph-input order; the batch builder (episodes.ts), the micro-batches (batch.ts), the train graph
 * (train_graph.ts) and the trainer's feeds (trainer.ts) all loop over this one list.
 *
 * @module
 */

import type { TrainConfig } from "../config/schema.ts";
import { POLICY_LOSSES, type PolicyLoss, type PolicyLossName, type TokenInput } from "./objective.ts";

/** What decides the train graph's per-token inputs. */
export interface AlgorithmSpec {
  objective: PolicyLossName;
  /** Whether the loss has its KL term (train.loss.beta > 0): the reference input and pass. */
  withReference: boolean;
}

/** The algorithm of `train.loss`: its policy loss, and its KL term when beta > 0. */
export function algorithmOf(train: TrainConfig): AlgorithmSpec {
  return { objective: train.loss.objective, withReference: train.loss.beta > 0 };
}

/** The policy loss of `spec`. */
export function policyLossOf(spec: AlgorithmSpec): PolicyLoss {
  return POLICY_LOSSES[spec.objective];
}

/** The reference input of `spec`, when its loss has a KL term and it is on. */
export function referenceInputOf(spec: AlgorithmSpec): TokenInput | undefined {
  return spec.withReference ? policyLossOf(spec).reference : undefined;
}

/** Every per-token input of the train graph of `spec`, in graph-input order. */
export function tokenInputsOf(spec: AlgorithmSpec): TokenInput[] {
  const reference = referenceInputOf(spec);
  return [...policyLossOf(spec).inputs, ...(reference ? [reference] : [])];
}

/** The inputs of `spec` read from batch columns (the rest the trainer computes). */
export function columnInputsOf(spec: AlgorithmSpec): TokenInput[] {
  return tokenInputsOf(spec).filter((i) => i.column !== null);
}
