/**
 * `deno task report RUN [--out FILE]`: renders the run directory RUN (runs/<name>) as one
 * self-contained HTML page, by default `RUN/report.html`, written atomically.
 *
 * The page is built by `renderReport` (lib/report/, exported for notebooks); this main only finds the
 * run, renders and writes.
 */
import { join } from "node:path";
import { writeTextAtomic } from "../lib/arrow/atomic.ts";
import { UserError } from "../lib/errors.ts";
import { renderReport } from "../lib/report/mod.ts";
import { runStageMain } from "../lib/stage/cli.ts";

/** Writes the report of the run directory `run`; returns the file written (default RUN/report.html). */
export async function writeReport(run: string | undefined, output?: string): Promise<string> {
  if (!run) {
    throw new UserError("report: no run directory given", {
      why: "the report is made from a run's files",
      fix: "pass it: deno task report runs/<name> [--out report.html]",
    });
  }
  const out = output ?? join(run, "report.html");
  await writeTextAtomic(out, await renderReport(run));
  return out;
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
    run: async (args) =>
      console.log(`report: wrote ${await writeReport(args.flags.run as string, args.output)}`),
  }, runAsFlag(Deno.args));
}
