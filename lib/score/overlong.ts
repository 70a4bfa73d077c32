/**
 * `overlong`: DAPO's soft overlong punishment (arXiv 2503.14476, equation 13) as a reward. With L the
 * tokens the policy sampled in the episode (every turn), L_max = `score.overlong.max_tokens` and
 * L_cache = `score.overlong.cache_tokens`:
 *
 *   L ≤ L_max − L_cache              0                              status `ok`
 *   L_max − L_cache < L ≤ L_max      (L_max − L_cache − L) / L_cache  status `soft` (in (−1, 0])
 *   L > L_max                        −1                             status `over`
 *
 * Added to the other rewards with its weight in `score.rewards` (DAPO adds it with weight 1). DAPO's other
 * overlong measure, masking truncated episodes out of the loss, is `mask` (docs/rewards.md).
 *
 * Deviations: L counts the sampled tokens of every turn together (DAPO's episodes have one turn); tool
 * outputs and prompts, which the policy did not sample, never count.
 *
 * @module
 */

import type { RewardFn } from "./types.ts";

export const overlong: RewardFn = {
  name: "overlong",
  doc: "DAPO's soft overlong punishment: 0 up to max_tokens - cache_tokens sampled tokens, then down to -1",
  score(episode, ctx) {
    if (!ctx.overlong) throw new Error("overlong reward: the score stage gave no score.overlong lengths");
    const { maxTokens, cacheTokens } = ctx.overlong;
    const length = episode.sampledTokens;
    if (length > maxTokens) return { value: -1, status: "over" };
    const start = maxTokens - cacheTokens;
    if (length <= start) return { value: 0, status: "ok" };
    return { value: (start - length) / cacheTokens, status: "soft" };
  },
};
