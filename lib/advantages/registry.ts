/**
 * Every advantage estimator by its `mask.estimator` name (the config's choices are these keys), and the
 * one place that picks one.
 *
 * @module
 */

import { drGrpo } from "./dr_grpo.ts";
import { gae } from "./gae.ts";
import { grpo } from "./grpo.ts";
import { mtGrpo } from "./mt_grpo.ts";
import { mtGrpoTurns } from "./mt_grpo_turns.ts";
import { rloo } from "./rloo.ts";
import type { Estimator } from "./types.ts";

export const ESTIMATOR_REGISTRY: Readonly<Record<string, Estimator>> = {
  grpo,
  dr_grpo: drGrpo,
  rloo,
  mt_grpo: mtGrpo,
  mt_grpo_turns: mtGrpoTurns,
  gae,
};

/** The estimator named in config. */
export function pickEstimator(name: string): Estimator {
  const estimator = ESTIMATOR_REGISTRY[name];
  if (!estimator) throw new Error(`no advantage estimator named ${name}`);
  return estimator;
}
