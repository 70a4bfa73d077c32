/**
 * `deno task bench --only …`: which sections to run. A comma-separated list, and the flag may repeat
 * (`--only rollout,score_mask` = `--only rollout --only score_mask`); an unknown name is refused, listing
 * the valid ones, before anything runs (a typo used to run nothing and exit 0).
 *
 * @module
 */

import { UserError } from "../lib/errors.ts";

/** The bench's sections, in the order they run. */
export const BENCH_SECTIONS = [
  "engine",
  "train",
  "weights",
  "rollout",
  "loop",
  "score_mask",
  "algorithms",
  "demo_seeds",
  "agent_seeds",
  "gpu",
] as const;

/**
 * Sections that run only when named: the algorithms comparison and the demo's seeds (with the tools
 * environment, or through the `openai` example agent) take long (about an hour per task; about ten
 * minutes per seed), and `gpu` needs a GPU provider.
 */
export const ON_REQUEST: readonly BenchSection[] = ["algorithms", "demo_seeds", "agent_seeds", "gpu"];
export type BenchSection = typeof BENCH_SECTIONS[number];

/** What runs without `--only`: every section but those that run only when named. */
export const DEFAULT_SECTIONS: readonly BenchSection[] = BENCH_SECTIONS.filter((s) =>
  !ON_REQUEST.includes(s)
);

/** The sections the `--only` values name (the default sections when none is given). */
export function parseOnly(values: readonly string[]): Set<BenchSection> {
  const names = values.flatMap((v) => v.split(",")).map((n) => n.trim()).filter((n) => n !== "");
  if (values.length > 0 && names.length === 0) {
    throw new UserError("deno task bench: --only", {
      value: values.join(","),
      why: "it names no section",
      fix: `pass one or more of ${BENCH_SECTIONS.join(", ")}, comma-separated`,
    });
  }
  for (const name of names) {
    if (!(BENCH_SECTIONS as readonly string[]).includes(name)) {
      throw new UserError("deno task bench: --only", {
        value: name,
        why: "no bench section has that name",
        fix: `use ${BENCH_SECTIONS.join(", ")} (comma-separated, e.g. --only rollout,score_mask)`,
      });
    }
  }
  return new Set((names.length ? names : DEFAULT_SECTIONS) as BenchSection[]);
}
