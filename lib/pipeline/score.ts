/**
 * The score stage: rewards for every episode of a rollouts table (`reward`, `reward_<name>`,
 * `status_<name>`, `turn_rewards`, `turn_reward`, `correct`), as the scored table. No model is loaded;
 * the rewards are pure functions registered by name (lib/score/, docs/rewards.md).
 *
 * @module
 */

import { outputTable } from "../arrow/stage_io.ts";
import { scoreColumns, type ScoreSummary } from "../score/score_table.ts";
import { stageFileOf, type StageInput, type StageOutput } from "./output.ts";
import type { Session } from "./session.ts";

export type { ScoreSummary };

/** Scores `rollouts` with the session's `score` settings. */
export async function score(
  session: Session,
  rollouts: StageInput,
  _request: { step: number } = { step: 0 },
): Promise<StageOutput<"scored", ScoreSummary>> {
  const { config } = session;
  const input = stageFileOf(rollouts, "rollouts");
  const { tools } = config.rollout;
  const { columns, summary } = await scoreColumns(input, {
    config: config.score,
    sandbox: { kind: tools.sandbox, unsafeNoSandbox: tools.unsafe_no_sandbox },
    judgeCacheDir: session.judgeCacheDir,
    log: session.showProgress ? (line) => session.progress.log(line) : undefined,
  });
  const table = outputTable(input, "scored", columns, { config_hash: session.configHash });
  return { kind: "scored", table, summary };
}
