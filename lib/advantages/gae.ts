/**
 * `gae` (PPO with a value head and generalized advantage estimation, Schulman et al. 2016): declared so
 * the config, the registry and the trainer's declared inputs have its place (it needs the `value` head
 * and per-token `values`), but not built: the value head does not exist yet. Picking it stops the
 * mask stage at its start with a one-line error.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import type { Estimator } from "./types.ts";

/** The one-line refusal. */
export function gaeNotBuilt(): UserError {
  return new UserError("config key mask.estimator", {
    value: "gae",
    why: "gae needs a value head, which is not built yet",
    fix: "use grpo, dr_grpo, rloo, mt_grpo or mt_grpo_turns",
  });
}

export const gae: Estimator = {
  name: "gae",
  doc: "PPO generalized advantage estimation over a value head (not built yet)",
  needs: { columns: ["reward"], perToken: ["values"], heads: ["value"] },
  advantages() {
    throw gaeNotBuilt();
  },
};
