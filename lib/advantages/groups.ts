/**
 * Groups (episodes of one task sampled together, by `group_id`) and the one normalization rule every
 * group-relative estimator shares.
 *
 * `normalize(values, groups, scale, eps)` for value v of episode i in group g:
 * - centred: c = v − mean_g (mean over the group's episodes);
 * - scale `group`: c / (std_g + eps), std_g Bessel-corrected (n − 1), as torch's `std()`, TRL and
 *   verl compute it; `batch`: c / (std_batch + eps) with std over every episode of the batch (TRL's
 *   `scale_rewards="batch"`); `none`: c.
 * - Zero-variance rule: a group of one episode, or whose values are all equal, gets exactly 0 and is
 *   counted in `zeroStdGroups` (TRL's `frac_reward_zero_std`). Testing equality instead of
 *   `std < eps` keeps a group whose rewards differ by less than eps from being zeroed, and keeps a
 *   float rounding of the mean from being divided by eps alone.
 *
 * @module
 */

/** Episodes by group, dense: group k's episodes are `members.subarray(start[k], start[k + 1])`. */
export interface Groups {
  count: number;
  start: Int32Array;
  members: Int32Array;
}

/** Groups of a `group_id` column (any int ids, in first-seen order). */
export function groupsOf(groupId: ArrayLike<number>): Groups {
  const dense = new Map<number, number>();
  const of = new Int32Array(groupId.length);
  for (let i = 0; i < groupId.length; i++) {
    let k = dense.get(groupId[i]);
    if (k === undefined) dense.set(groupId[i], k = dense.size);
    of[i] = k;
  }
  const start = new Int32Array(dense.size + 1);
  for (let i = 0; i < of.length; i++) start[of[i] + 1]++;
  for (let k = 0; k < dense.size; k++) start[k + 1] += start[k];
  const fill = start.slice(0, dense.size);
  const members = new Int32Array(of.length);
  for (let i = 0; i < of.length; i++) members[fill[of[i]]++] = i;
  return { count: dense.size, start, members };
}

/** Bessel-corrected standard deviation (0 for fewer than two values). */
export function stdOf(values: ArrayLike<number>, index?: ArrayLike<number>): number {
  const n = index ? index.length : values.length;
  if (n < 2) return 0;
  const at = (k: number) => values[index ? index[k] : k];
  let sum = 0;
  for (let k = 0; k < n; k++) sum += at(k);
  const mean = sum / n;
  let ss = 0;
  for (let k = 0; k < n; k++) ss += (at(k) - mean) ** 2;
  return Math.sqrt(ss / (n - 1));
}

/** What `normalize` produced. */
export interface Normalized {
  /** One value per episode. */
  adv: Float64Array;
  zeroStdGroups: number;
}

/** How a group's centred value is formed: plain (grpo) or leave-one-out (rloo). */
export type Centering = "mean" | "leave_one_out";

/** Group-relative values under the rule in the module comment. */
export function normalize(
  values: ArrayLike<number>,
  groups: Groups,
  scale: "group" | "batch" | "none",
  eps: number,
  centering: Centering = "mean",
): Normalized {
  const adv = new Float64Array(values.length);
  const batchStd = scale === "batch" ? stdOf(values) : 0;
  let zeroStdGroups = 0;
  for (let k = 0; k < groups.count; k++) {
    const idx = groups.members.subarray(groups.start[k], groups.start[k + 1]);
    if (allEqual(values, idx)) {
      zeroStdGroups++;
      continue; // exactly 0
    }
    let sum = 0;
    for (const i of idx) sum += values[i];
    const n = idx.length;
    const mean = sum / n;
    const factor = centering === "leave_one_out" ? n / (n - 1) : 1;
    const div = scale === "group" ? stdOf(values, idx) + eps : scale === "batch" ? batchStd + eps : 1;
    for (const i of idx) adv[i] = factor * (values[i] - mean) / div;
  }
  return { adv, zeroStdGroups };
}

function allEqual(values: ArrayLike<number>, idx: Int32Array): boolean {
  for (let k = 1; k < idx.length; k++) if (values[idx[k]] !== values[idx[0]]) return false;
  return true;
}

/** Writes one scalar per episode onto its masked tokens (0 elsewhere). */
export function broadcast(
  perEpisode: ArrayLike<number>,
  offsets: Int32Array,
  mask: Uint8Array,
): Float32Array {
  const out = new Float32Array(mask.length);
  for (let i = 0; i + 1 < offsets.length; i++) {
    const v = perEpisode[i];
    if (v === 0) continue;
    for (let t = offsets[i]; t < offsets[i + 1]; t++) if (mask[t]) out[t] = v;
  }
  return out;
}

/** The fraction of groups with zero variance (NaN for an empty batch). */
export function fracZero(zero: number, groups: Groups): number {
  return groups.count ? zero / groups.count : NaN;
}
