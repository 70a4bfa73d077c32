/**
 * `agent`: the reward the agent itself reported for its episode — sent with
 * `POST /v1/episodes/{id}/end {"reward": r}` to `deno task serve --record` (docs/agents.md), kept in the
 * task as `meta.gateway.reward`. Status `reported`. An episode without one is a fault of the data, not
 * of the model: it stops the stage naming the episode.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import type { RewardFn } from "./types.ts";

export const agent: RewardFn = {
  name: "agent",
  doc: "the reward the agent reported when it ended its recorded episode",
  score({ task, episodeId }) {
    const gateway = (task?.meta as { gateway?: { reward?: unknown } } | undefined)?.gateway;
    const reward = gateway?.reward;
    if (typeof reward !== "number" || !Number.isFinite(reward)) {
      throw new UserError(`reward agent: episode ${episodeId}`, {
        value: reward ?? null,
        why: "it carries no reward from its agent (only serve --record episodes ended with a reward do)",
        fix:
          'end the episode with POST /v1/episodes/{id}/end {"reward": r}, or remove agent from score.rewards',
      });
    }
    return { value: reward, status: "reported" };
  },
};
