/**
 * `gae` (PPO's generalized advantage estimation, Schulman et al. 2016, over a value head): per-step
 * advantages and returns from the rollout's per-token `values` (the value head's V of the state before
 * each token, written by the rollout stage) and the episode's `reward`, given once, at its end.
 *
 * Over the steps k = 1..n of one episode, with r_k = 0 except r_n = reward:
 *
 *   δ_k = r_k + γ · V_{k+1} − V_k        (V_{n+1} = 0: the episode has ended)
 *   A_k = δ_k + γλ · A_{k+1}             (A_{n+1} = 0)
 *   R_k = A_k + V_k                      (the value head's target: `returns`)
 *
 * `mask.gae_unit` says what a step is:
 * - `token`: every trained token (loss mask 1), in order, V_k = `values` at that token, as verl's
 *   `compute_gae_advantage_return` does for multi-turn rollouts: tokens outside the loss mask (tool results,
 *   the environment's headers) are skipped, so the chain runs over the policy's own tokens.
 * - `turn`: every assistant turn with trained tokens (by `turn_idx`), V_j = `values` at the turn's last
 *   trained token, as seed 002 takes a step's value from its last token; every trained token of turn j
 *   gets A_j and R_j.
 *
 * Choices: the reward sits on the last trained token (token) or turn (turn), never on an untrained
 * token where the skip rule would lose it; tokens outside the loss mask get advantage 0 and return 0.
 * Deviations, named: an episode cut by a token or turn limit ends like any other (no bootstrap from the
 * value after the cut, as verl and seed 002 do: the value after the last token is never computed); an
 * episode with no trained token (e.g. zeroed by `mask.mask_truncated`) gets zeros. `mask.whiten`
 * (seed 002 normalizes advantages, per minibatch) applies after this, over the whole batch, to the
 * advantages only; returns stay unwhitened.
 *
 * @module
 */

import type { ConfigRule } from "../algorithm_rules.ts";
import { UserError } from "../errors.ts";
import { normalize } from "./groups.ts";
import type { EpisodeBatch, Estimator } from "./types.ts";

/** Advantages and returns of one chain of steps (values and rewards in step order), in float64. */
export function gaeChain(
  values: ArrayLike<number>,
  rewards: ArrayLike<number>,
  gamma: number,
  lam: number,
): { advantages: Float64Array; returns: Float64Array } {
  const n = values.length;
  const advantages = new Float64Array(n), returns = new Float64Array(n);
  let next = 0, running = 0;
  for (let k = n - 1; k >= 0; k--) {
    const delta = rewards[k] + gamma * next - values[k];
    running = delta + gamma * lam * running;
    advantages[k] = running;
    returns[k] = running + values[k];
    next = values[k];
  }
  return { advantages, returns };
}

/** The steps of episode i: each a list of its trained tokens (one token each for `token`). */
function stepsOf(batch: EpisodeBatch, i: number, unit: "token" | "turn"): number[][] {
  const steps: number[][] = [];
  let turn = -1;
  for (let t = batch.offsets[i]; t < batch.offsets[i + 1]; t++) {
    if (!batch.lossMask[t]) continue;
    if (unit === "token" || batch.turnIdx[t] !== turn) steps.push([]);
    turn = batch.turnIdx[t];
    steps[steps.length - 1].push(t);
  }
  return steps;
}

/** Mean of `values` at the trained tokens, and the fraction of the returns' variance they explain. */
function valueStats(batch: EpisodeBatch, values: Float32Array, returns: Float32Array) {
  let n = 0, v = 0, r = 0;
  for (let t = 0; t < values.length; t++) {
    if (!batch.lossMask[t]) continue;
    n++;
    v += values[t];
    r += returns[t];
  }
  if (n < 2) return { value_mean: n ? v / n : NaN, explained_var: NaN };
  const rMean = r / n;
  let resid = 0, total = 0, residMean = 0;
  for (let t = 0; t < values.length; t++) if (batch.lossMask[t]) residMean += returns[t] - values[t];
  residMean /= n;
  for (let t = 0; t < values.length; t++) {
    if (!batch.lossMask[t]) continue;
    resid += (returns[t] - values[t] - residMean) ** 2;
    total += (returns[t] - rMean) ** 2;
  }
  return { value_mean: v / n, explained_var: total > 0 ? 1 - resid / total : NaN };
}

/** PPO's passes over a batch are its epochs of minibatches (`train.ppo_epochs`), not GRPO's passes. */
const ppoEpochs: ConfigRule = ({ train }) => {
  if (train.num_iterations === 1) return;
  throw new UserError("config key train.num_iterations", {
    value: train.num_iterations,
    why: "with mask.estimator gae (PPO) the passes over a batch are train.ppo_epochs, in minibatches",
    fix: `set train.num_iterations to 1 and train.ppo_epochs to ${train.num_iterations}`,
  });
};

export const gae: Estimator = {
  name: "gae",
  doc: "PPO's generalized advantage estimation over the value head's per-token values",
  needs: { columns: ["reward"], perToken: ["values", "turn_idx"], heads: ["value"] },
  rules: [ppoEpochs],
  advantages(batch, o) {
    const values = batch.values!;
    const advantages = new Float32Array(batch.lossMask.length);
    const returns = new Float32Array(batch.lossMask.length);
    for (let i = 0; i < batch.rows; i++) {
      const steps = stepsOf(batch, i, o.gae_unit);
      if (steps.length === 0) continue;
      const v = steps.map((tokens) => values[tokens[tokens.length - 1]]);
      const r = steps.map((_, k) => (k === steps.length - 1 ? batch.reward[i] : 0));
      const chain = gaeChain(v, r, o.gamma, o.lam);
      steps.forEach((tokens, k) => {
        for (const t of tokens) [advantages[t], returns[t]] = [chain.advantages[k], chain.returns[k]];
      });
    }
    const { zeroStdGroups } = normalize(batch.reward, batch.groups, "none", o.std_eps);
    return {
      advantages,
      returns,
      metrics: {
        frac_zero_std_groups: batch.groups.count ? zeroStdGroups / batch.groups.count : NaN,
        ...valueStats(batch, values, returns),
      },
    };
  },
};
