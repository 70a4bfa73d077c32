/**
 * `deno task report RUN [--out FILE]`: renders the run directory RUN (runs/<name>) as one
 * self-contained HTML page, by default `RUN/report.html`, written atomically.
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
import { report, writeStageOutput } from "../lib/pipeline/mod.ts";
import { requireRunDir } from "../lib/report/mod.ts";
import { inputsOf, runStageMain, type StageArgs } from "../lib/cli/cli.ts";

function requireRunFlag(run: string | undefined): string {
  if (run) return run;
  throw new UserError("report: no run directory given", {
    why: "the report is made from a run's files",
    fix: "pass it: deno task report runs/<name> [--out report.html]",
  });
}

/** The run is a run directory; the report's path (default RUN/report.html, set here) may be written. */
async function check(args: StageArgs): Promise<void> {
  const run = requireRunFlag(args.flags.run as string | undefined);
  await requireRunDir(run);
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

/** `report RUN …` as `report --run RUN …`: the shared main takes named flags only. */
function runAsFlag(argv: string[]): string[] {
  return argv.length && !argv[0].startsWith("-") ? ["--run", argv[0], ...argv.slice(1)] : argv;
}

if (import.meta.main) {
  await runStageMain({
    name: "report",
    summary: "Renders a run directory (RUN, the first argument, or --run RUN) as one self-contained HTML " +
      "page with charts per step, eval points and trajectories; writes RUN/report.html unless --out is given.",
    stringFlags: ["run"],
    output: { kind: "html" },
    flagHelp: ["--run DIR        the run directory (or give it as the first argument)"],
    examples: ["deno task report runs/try", "deno task report runs/try --out runs/try-report.html"],
    check,
    run: async (args) => {
      await writeStageOutput(args.output!, await report(args.flags.run as string));
      console.log(`report: wrote ${args.output}`);
    },
  }, runAsFlag(Deno.args));
}
