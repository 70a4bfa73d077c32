/**
 * The loss mask of every episode, as one flat Uint8Array aligned with `tokens`.
 *
 * Default (`mask.loss_mask: sampled`): the mask is the `sampled` column: 1 exactly on the tokens the
 * policy sampled. So the prompt, tool results, the `<|im_start|>assistant\n` headers and empty think
 * blocks the environment appended are 0; every sampled token is 1, including earlier turns'
 * `<think>` (we keep them in the trajectory, unlike Qwen3's template), a malformed tool call (a model
 * action like any other, judged by its rewards) and the final `<|im_end|>`. `roles` uses the state
 * machine of roles.ts instead.
 *
 * `mask.mask_truncated`: episodes cut by a token limit (finish_reason `length`: inside a turn, or
 * `truncated`: the next turn would not fit) get an all-zero mask (DAPO's overlong filtering).
 *
 * @module
 */

import { roleMaskInto, type RoleTokens } from "./roles.ts";

/** Finish reasons of episodes cut by a token limit. */
export const TRUNCATED_REASONS: readonly string[] = ["length", "truncated"];

/** The mask from `sampled` (a copy: the input column stays as it was). */
export function maskFromSampled(sampled: Uint8Array, offsets: Int32Array): Uint8Array {
  return sampled.slice(0, offsets[offsets.length - 1]);
}

/** The mask from the role state machine. */
export function maskFromRoles(
  tokens: Int32Array,
  offsets: Int32Array,
  promptLen: Int32Array,
  ids: RoleTokens,
): Uint8Array {
  const out = new Uint8Array(offsets[offsets.length - 1]);
  for (let i = 0; i + 1 < offsets.length; i++) {
    roleMaskInto(tokens, offsets[i], offsets[i + 1], promptLen[i], ids, out);
  }
  return out;
}

/** Zeroes the mask of truncated episodes; returns how many were zeroed. */
export function zeroTruncated(
  mask: Uint8Array,
  offsets: Int32Array,
  finishReason: readonly string[],
): number {
  let n = 0;
  for (let i = 0; i < finishReason.length; i++) {
    if (!TRUNCATED_REASONS.includes(finishReason[i])) continue;
    mask.fill(0, offsets[i], offsets[i + 1]);
    n++;
  }
  return n;
}
