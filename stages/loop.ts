/**
 * `deno task loop`: Runs rollout, score, mask and train for many steps in runs/<name>/, resumable.
 *
 * The stage is a pure function (`loop`, exported from mod.ts for notebooks) plus a thin `main`.
 * Its body is built by a later issue; until then it exits 2 and writes nothing.
 */
import { NotImplementedError, runStageMain, type StageArgs } from "../lib/stage/cli.ts";

/** Runs rollout, score, mask and train for many steps in runs/<name>/, resumable. */
export function loop(_args: StageArgs): Promise<void> {
  return Promise.reject(new NotImplementedError("loop"));
}

if (import.meta.main) {
  await runStageMain({
    name: "loop",
    summary: "Runs rollout, score, mask and train for many steps in runs/<name>/, resumable.",
    needsInput: false,
    needsOutput: false,
    run: loop,
  });
}
