/**
 * A toy policy loss, written the way a new loss is added: this one file (its record) plus one
 * `registerPolicyLoss(TOY)` line (in tests/train/toy_loss_test.ts). It declares a scalar of its own
 * (`train.loss.toy_scale`), a per-token input read from a batch column under a name of its own
 * (`toy_weight` from `advantages`), a config rule, and where its gradient stops:
 *
 *   l = -toy_scale · toy_weight · lp
 *
 * @module
 */

import type { AlgorithmConfigView } from "../../lib/algorithm_rules.ts";
import { UserError } from "../../lib/errors.ts";
import { OPS } from "../../lib/onnx/ops.ts";
import type { LossScalar, PolicyLoss, TokenInput } from "../../lib/losses/types.ts";

const { Mul, Neg } = OPS;

export const TOY_SCALE: LossScalar = {
  key: "toy_scale",
  default: 1,
  min: 0,
  max: 2,
  doc: "toy loss: the weight of its REINFORCE term",
};

export const TOY_WEIGHT: TokenInput = {
  name: "toy_weight",
  column: "advantages",
  doc: "toy loss: the per-token weight, read from the batch's advantages",
};

/** The toy is on-policy: one pass per batch. */
function onePass({ train }: AlgorithmConfigView): void {
  if (train.num_iterations === 1) return;
  throw new UserError("config key train.num_iterations", {
    value: train.num_iterations,
    why: "train.loss.objective toy is on-policy",
    fix: "set train.num_iterations to 1",
  });
}

export const TOY: PolicyLoss = {
  name: "toy",
  doc: "toy: REINFORCE on the log-probs, scaled",
  inputs: [TOY_WEIGHT],
  scalars: [TOY_SCALE],
  readsOldLogprobs: false,
  takesHeads: false,
  gradientStops: "nowhere",
  rules: [onePass],
  tokenLoss: (g, x) => {
    const pg = Neg.emit(
      g,
      Mul.emit(g, Mul.emit(g, x.inputs[TOY_WEIGHT.name], x.scalars[TOY_SCALE.key]), x.logprobs),
    );
    const zero = Mul.emit(g, x.logprobs, 0); // [C]
    return { loss: pg, pg, kl: zero, clipped: zero };
  },
};
