/**
 * Every policy loss by its `train.loss.objective` name, and the one place that registers one. A loss is
 * its record (types.ts) in a file of its own, one `registerPolicyLoss` line, and its test; the config
 * checks (the objective's choices, its scalars' keys and ranges, its rules), the batch reader, the
 * micro-batches, the train graph and the trainer's feeds read the records, so nothing else names it.
 *
 * @module
 */

import { CLIPPED, SFT } from "./objective.ts";
import { GSPO } from "./gspo.ts";
import { CISPO } from "./cispo.ts";
import type { PolicyLoss } from "./types.ts";

const REGISTRY = new Map<string, PolicyLoss>();
/** The registered names, in registration order: `train.loss.objective`'s choices (a live list). */
export const POLICY_LOSS_NAMES: string[] = [];
const listeners: ((loss: PolicyLoss) => void)[] = [];

/**
 * Adds `loss` under its name; a name registered twice, or a scalar key declared with another range or
 * default than a registered loss gave it, is a bug in the caller.
 */
export function registerPolicyLoss(loss: PolicyLoss): void {
  if (REGISTRY.has(loss.name)) throw new Error(`policy loss ${loss.name} is registered twice`);
  for (const scalar of loss.scalars) {
    const other = allScalars().find((s) => s.key === scalar.key);
    if (other && JSON.stringify(other) !== JSON.stringify(scalar)) {
      throw new Error(`policy loss ${loss.name}: scalar ${scalar.key} is declared otherwise by another loss`);
    }
  }
  REGISTRY.set(loss.name, loss);
  POLICY_LOSS_NAMES.push(loss.name);
  for (const listener of listeners) listener(loss);
}

/** The loss registered as `name` (the configuration was checked against the names: a miss is a bug). */
export function policyLossNamed(name: string): PolicyLoss {
  const loss = REGISTRY.get(name);
  if (!loss) throw new Error(`no policy loss named ${name} (registered: ${POLICY_LOSS_NAMES.join(", ")})`);
  return loss;
}

/** Calls `listener` with every registered loss now and with each one registered later. */
export function eachPolicyLoss(listener: (loss: PolicyLoss) => void): void {
  for (const loss of REGISTRY.values()) listener(loss);
  listeners.push(listener);
}

function allScalars() {
  return [...REGISTRY.values()].flatMap((l) => l.scalars);
}

registerPolicyLoss(CLIPPED);
registerPolicyLoss(SFT);
registerPolicyLoss(GSPO);
registerPolicyLoss(CISPO);
