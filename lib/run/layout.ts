/**
 * Where a run keeps its files (docs/runs.md):
 *
 *   runs/<name>/config.yaml              resolved config snapshot
 *   runs/<name>/lock                     pid of the running loop
 *   runs/<name>/latest                   "step-0003": the last complete step, written last, atomically
 *   runs/<name>/metrics.arrow            one row per loop step (kind run_metrics)
 *   runs/<name>/step-NNNN/{rollouts,scored,batch,metrics}.arrow
 *   runs/<name>/step-NNNN/gen-GG/{rollouts,scored}.arrow   each generation batch (loop.filter_groups)
 *   runs/<name>/adapters/step-NNNN/      PEFT adapter + optimizer state
 *   runs/<name>/eval/step-NNNN.arrow     held-out evaluation (step-0000: before training)
 *   runs/<name>/report.html
 *   runs/<name>/judge-cache/             the judge reward's cached answers (when it is configured)
 *
 * @module
 */

import { join } from "node:path";
import { JUDGE_CACHE_NAME } from "../score/judge/cache.ts";

/** `step-0003` for step 3. */
export function stepName(step: number): string {
  return `step-${String(step).padStart(4, "0")}`;
}

/** The paths of one run directory. */
export class RunLayout {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  get config(): string {
    return join(this.dir, "config.yaml");
  }
  get lock(): string {
    return join(this.dir, "lock");
  }
  get latest(): string {
    return join(this.dir, "latest");
  }
  get metrics(): string {
    return join(this.dir, "metrics.arrow");
  }
  get report(): string {
    return join(this.dir, "report.html");
  }
  get judgeCache(): string {
    return join(this.dir, JUDGE_CACHE_NAME);
  }

  stepDir(step: number): string {
    return join(this.dir, stepName(step));
  }

  stepFile(step: number, file: "rollouts" | "scored" | "batch" | "metrics"): string {
    return join(this.stepDir(step), `${file}.arrow`);
  }

  /** A generation batch's file under dynamic sampling (loop.filter_groups): `step-NNNN/gen-GG/<file>.arrow`. */
  genFile(step: number, batch: number, file: "rollouts" | "scored"): string {
    return join(this.stepDir(step), `gen-${String(batch).padStart(2, "0")}`, `${file}.arrow`);
  }

  adapter(step: number): string {
    return join(this.dir, "adapters", stepName(step));
  }

  eval(step: number): string {
    return join(this.dir, "eval", `${stepName(step)}.arrow`);
  }
}

/** The step number of a `latest` pointer's text (`step-0003` → 3). */
export function parseStepName(text: string): number | null {
  const m = /^step-(\d{4,})$/.exec(text.trim());
  return m ? Number(m[1]) : null;
}
