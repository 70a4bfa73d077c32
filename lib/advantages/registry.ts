/**
 * Every advantage estimator by its `mask.estimator` name, and the one place that picks one.
 *
 * @module
 */

import type { Estimator as EstimatorName } from "../config/schema.ts";
import { drGrpo } from "./dr_grpo.ts";
import { gae } from "./gae.ts";
import { grpo } from "./grpo.ts";
import { mtGrpo } from "./mt_grpo.ts";
import { mtGrpoTurns } from "./mt_grpo_turns.ts";
import { rloo } from "./rloo.ts";
import type { Estimator } from "./types.ts";

export const ESTIMATOR_REGISTRY: Readonly<Record<EstimatorName, Estimator>> = {
  grpo,
  dr_grpo: drGrpo,
  rloo,
  mt_grpo: mtGrpo,
  mt_grpo_turns: mtGrpoTurns,
  gae,
};

/** The estimator named in config. */
export function pickEstimator(name: EstimatorName): Estimator {
  return ESTIMATOR_REGISTRY[name];
}
