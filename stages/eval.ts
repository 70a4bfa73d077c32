/**
 * `deno task eval`: Evaluates the policy (base plus adapter) on held-out tasks, writing eval.arrow.
 *
 * The stage is a pure function (`evaluate`, exported from mod.ts for notebooks) plus a thin `main`.
 * Its body is built by a later issue; until then it exits 2 and writes nothing.
 */
import { NotImplementedError, runStageMain, type StageArgs } from "../lib/stage/cli.ts";

/** Evaluates the policy (base plus adapter) on held-out tasks, writing eval.arrow. */
export function evaluate(_args: StageArgs): Promise<void> {
  return Promise.reject(new NotImplementedError("eval"));
}

if (import.meta.main) {
  await runStageMain({
    name: "eval",
    summary: "Evaluates the policy (base plus adapter) on held-out tasks, writing eval.arrow.",
    needsInput: false,
    needsOutput: true,
    run: evaluate,
  });
}
