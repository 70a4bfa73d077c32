/**
 * `deno task score`: Adds rewards (reward, reward_<name>, turn_rewards, correct) to rollouts.arrow, writing scored.arrow.
 *
 * The stage is a pure function (`score`, exported from mod.ts for notebooks) plus a thin `main`.
 * Its body is built by a later issue; until then it exits 2 and writes nothing.
 */
import { NotImplementedError, runStageMain, type StageArgs } from "../lib/stage/cli.ts";

/** Adds rewards (reward, reward_<name>, turn_rewards, correct) to rollouts.arrow, writing scored.arrow. */
export function score(_args: StageArgs): Promise<void> {
  return Promise.reject(new NotImplementedError("score"));
}

if (import.meta.main) {
  await runStageMain({
    name: "score",
    summary:
      "Adds rewards (reward, reward_<name>, turn_rewards, correct) to rollouts.arrow, writing scored.arrow.",
    needsInput: true,
    needsOutput: true,
    run: score,
  });
}
