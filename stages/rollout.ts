/**
 * `deno task rollout`: Samples multi-turn episodes (chat template, tools, group sampling) from the tasks into rollouts.arrow.
 *
 * The stage is a pure function (`rollout`, exported from mod.ts for notebooks) plus a thin `main`.
 * Its body is built by a later issue; until then it exits 2 and writes nothing.
 */
import { NotImplementedError, runStageMain, type StageArgs } from "../lib/stage/cli.ts";

/** Samples multi-turn episodes (chat template, tools, group sampling) from the tasks into rollouts.arrow. */
export function rollout(_args: StageArgs): Promise<void> {
  return Promise.reject(new NotImplementedError("rollout"));
}

if (import.meta.main) {
  await runStageMain({
    name: "rollout",
    summary:
      "Samples multi-turn episodes (chat template, tools, group sampling) from the tasks into rollouts.arrow.",
    needsInput: false,
    needsOutput: true,
    run: rollout,
  });
}
