/**
 * A custom reward module: name it in config and it runs beside the built-in rewards.
 *
 *   score:
 *     modules: [examples/custom_reward.ts]
 *     module_weights: [0.2]
 *
 * The default export is a reward: a snake_case `name` (its column is `reward_<name>`, its status
 * `status_<name>`), a one-line `doc`, and `score(episode, ctx)` returning `{ value, status }` (plus
 * `correct` if it judges the final answer). Return 0 with a status for anything the model did wrong;
 * throw only for faults that are not the model's. See docs/rewards.md.
 */
import type { RewardFn } from "../lib/score/types.ts";

/** Rewards short final answers: 1 at or under 200 characters, falling linearly to 0 at 1,000. */
const brevity: RewardFn = {
  name: "brevity",
  doc: "1 for a final message of at most 200 characters, down to 0 at 1,000",
  score(episode) {
    const n = episode.finalText.length;
    if (n === 0) return { value: 0, status: "empty" };
    const value = Math.max(0, Math.min(1, (1000 - n) / 800));
    return { value, status: value === 1 ? "short" : "long" };
  },
};

export default brevity;
