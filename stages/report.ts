/**
 * `deno task report RUN [--out FILE]`: renders the run directory RUN (runs/<name>) as one
 * self-contained HTML page, by default `RUN/report.html`, written atomically.
 * `deno task report RUN_A RUN_B … --out FILE`: several runs on one comparison page (held-out accuracy,
 * tool use and training curves, one line per run; lib/report/compare.ts); `--out` is required then.
 *
 * The page is built by the pipeline's `report` (lib/pipeline/report.ts, lib/report/); this main only
 * finds the run, renders and writes. Before anything is read or written, RUN must be a run directory (a folder
 * without run files is refused, naming the run directories below it) and the output passes the output
 * policy (docs/outputs.md): an explicit `--out` like any output (an earlier report of ours replaced only
 * with `--overwrite`); the default `RUN/report.html` may also refresh the run's own report without it,
 * since the loop rewrites that file at the end of every run. A `report.html` without the report's marker
 * is never replaced.
 *
 * @module
 */
import { join } from "node:path";
import { UserError } from "../lib/errors.ts";
import { checkOutputPath } from "../lib/fs/output.ts";
import { compareReport, report, writeStageOutput } from "../lib/pipeline/mod.ts";
import { requireRunDir } from "../lib/report/mod.ts";
import { inputsOf, runStageMain, type StageArgs } from "../lib/cli/cli.ts";

function requireRuns(runs: string[]): string[] {
  if (runs.length > 0) return runs;
  throw new UserError("report: no run directory given", {
    why: "the report is made from a run's files",
    fix:
      "pass it: deno task report runs/<name> [--out report.html] (or several runs and --out to compare them)",
  });
}

/** Each run is a run directory; the page's path (default RUN/report.html for one run) may be written. */
async function check(args: StageArgs): Promise<void> {
  const runs = requireRuns(args.lists.run);
  for (const run of runs) await requireRunDir(run);
  if (runs.length > 1) return await checkComparison(args, runs);
  const run = runs[0];
  const isDefault = args.output === undefined;
  args.output ??= join(run, "report.html");
  await checkOutputPath(args.output, { kind: "html" }, {
    inputs: inputsOf(args, false),
    hosts: [run],
    overwrite: args.overwrite,
    resume: isDefault, // the run's own report, rewritten by the loop too
    flag: isDefault ? "the report" : "--out",
  });
}

/** Several runs: the page goes where `--out` says, never into one of the runs by default. */
async function checkComparison(args: StageArgs, runs: string[]): Promise<void> {
  if (args.output === undefined) {
    throw new UserError("report: several run directories", {
      value: runs.join(" "),
      why: "a comparison page belongs to no one run, so it has no default place",
      fix: "name it: deno task report RUN_A RUN_B --out runs/compare.html",
    });
  }
  await checkOutputPath(args.output, { kind: "html" }, {
    inputs: [...inputsOf(args, false), ...runs],
    overwrite: args.overwrite,
    flag: "--out",
  });
}

/** `report RUN_A RUN_B … [flags]` as `report --run RUN_A --run RUN_B …`: the shared main takes named flags only. */
function runAsFlag(argv: string[]): string[] {
  const positional = argv.findIndex((a) => a.startsWith("-"));
  const runs = positional === -1 ? argv : argv.slice(0, positional);
  return [...runs.flatMap((run) => ["--run", run]), ...argv.slice(runs.length)];
}

if (import.meta.main) {
  await runStageMain({
    name: "report",
    summary: "Renders a run directory (RUN, the first argument, or --run RUN) as one self-contained HTML " +
      "page with charts per step, eval points and trajectories; writes RUN/report.html unless --out is given. " +
      "Several runs (RUN_A RUN_B …) give one comparison page, written to --out.",
    multipleFlags: ["run"],
    output: { kind: "html" },
    flagHelp: ["--run DIR        a run directory (or give them first: RUN_A RUN_B …); several compare"],
    examples: [
      "deno task report runs/try",
      "deno task report runs/try --out runs/try-report.html",
      "deno task report runs/demo/run runs/try --out runs/compare.html",
    ],
    check,
    run: async (args) => {
      const runs = args.lists.run;
      await writeStageOutput(
        args.output!,
        runs.length > 1 ? await compareReport(runs) : await report(runs[0]),
      );
      console.log(`report: wrote ${args.output}`);
    },
  }, runAsFlag(Deno.args));
}
