/**
 * `deno task train`: Trains the LoRA adapter on batch.arrow, writing a PEFT adapter directory and metrics.arrow.
 *
 * The stage is a pure function (`train`, exported from mod.ts for notebooks) plus a thin `main`.
 * Its body is built by a later issue; until then it exits 2 and writes nothing.
 */
import { NotImplementedError, runStageMain, type StageArgs } from "../lib/stage/cli.ts";

/** Trains the LoRA adapter on batch.arrow, writing a PEFT adapter directory and metrics.arrow. */
export function train(_args: StageArgs): Promise<void> {
  return Promise.reject(new NotImplementedError("train"));
}

if (import.meta.main) {
  await runStageMain({
    name: "train",
    summary: "Trains the LoRA adapter on batch.arrow, writing a PEFT adapter directory and metrics.arrow.",
    needsInput: true,
    needsOutput: true,
    run: train,
  });
}
