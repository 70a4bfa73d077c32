/**
 * The thin `main` shared by every stage script: flags, config, one-line errors, exit codes.
 *
 * A stage is a pure function plus this wrapper (STYLE.md 1). Exit codes: 0 done, 2 bad input or a stage
 * that is not implemented yet, 130 interrupted, 1 an unexpected fault (stack trace shown).
 */
import { parseArgs } from "@std/cli";
import { UserError } from "../errors.ts";
import { configHelp, loadConfig } from "../config/load.ts";
import type { Config } from "../config/schema.ts";

export interface StageArgs {
  /** Resolved, validated configuration (file plus overrides). */
  config: Config;
  /** sha256 of the resolved configuration, written into every output's metadata. */
  configHash: string;
  /** Named flags other than the common ones. */
  flags: Record<string, string | boolean | undefined>;
  input?: string;
  output?: string;
}

export interface StageSpec {
  /** Stage name as in `deno task NAME`. */
  name: string;
  /** One paragraph: what the stage reads and writes. */
  summary: string;
  /** Extra flags beyond --in, --out, --config, --help, --debug. */
  stringFlags?: string[];
  booleanFlags?: string[];
  /** Help lines for the extra flags. */
  flagHelp?: string[];
  /** Whether --in and --out are required. */
  needsInput?: boolean;
  needsOutput?: boolean;
  run(args: StageArgs): Promise<void>;
}

/** Thrown by a stage whose body a later issue will write: exits 2, writes nothing. */
export class NotImplementedError extends UserError {
  constructor(stage: string) {
    super(`${stage}: not implemented yet`, {
      why: "this stage's body is built by a later issue; no output was written",
      fix: "use the stages that exist (see README.md) or wait for the issue that implements it",
    });
  }
}

/** Usage text for `--help`. */
export function stageHelp(spec: StageSpec): string {
  const lines = [
    `deno task ${spec.name} [--in FILE] [--out PATH] [--config FILE] [--section.key=value ...]`,
    "",
    spec.summary,
    "",
    "Flags:",
    "  --in FILE        input stage file" + (spec.needsInput ? " (required)" : ""),
    "  --out PATH       output file or directory" + (spec.needsOutput ? " (required)" : ""),
    "  --config FILE    configuration file (default: the repository's config.yaml)",
    "  --a.b=VALUE      override one configuration key, e.g. --rollout.temperature=0.7",
    "  --debug          show stack traces",
    "  --help           this text",
    ...(spec.flagHelp ?? []).map((line) => `  ${line}`),
    "",
    "Configuration keys:",
    configHelp(),
  ];
  return lines.join("\n");
}

/** Runs a stage from the command line; never returns normally when run as a script. */
export async function runStageMain(spec: StageSpec, argv: string[] = Deno.args): Promise<never> {
  const debug = argv.includes("--debug");
  try {
    const parsed = parseFlags(spec, argv);
    if (parsed.values.help) {
      console.log(stageHelp(spec));
      Deno.exit(0);
    }
    const args = await resolveArgs(spec, parsed.values, parsed.overrides);
    exitOnInterrupt(spec.name);
    await spec.run(args);
    Deno.exit(0);
  } catch (error) {
    Deno.exit(reportFailure(spec.name, error, debug));
  }
}

/**
 * Ctrl-C: one line and exit 130. Every output is written to a temporary name and renamed into place,
 * so an interrupted stage leaves its previous outputs intact (or none), never a partial file.
 */
function exitOnInterrupt(stage: string): void {
  Deno.addSignalListener("SIGINT", () => {
    console.error(
      `${stage}: interrupted; no partial output was written (earlier outputs are intact). ` +
        "Run the same command again to redo the stage.",
    );
    Deno.exit(130);
  });
}

function parseFlags(spec: StageSpec, argv: string[]) {
  try {
    return parseArgs(argv, {
      string: ["in", "out", "config", ...(spec.stringFlags ?? [])],
      boolean: ["help", "debug", ...(spec.booleanFlags ?? [])],
    });
  } catch (error) {
    throw new UserError(`${spec.name}: bad command line`, {
      why: (error as Error).message.replace(/\.$/, ""),
      fix: `run 'deno task ${spec.name} --help' for the flags`,
    });
  }
}

async function resolveArgs(
  spec: StageSpec,
  values: Record<string, string | boolean | undefined>,
  overrides: Array<[string, string]>,
): Promise<StageArgs> {
  const input = values.in as string | undefined;
  const output = values.out as string | undefined;
  if (spec.needsInput && !input) missingFlag(spec.name, "--in FILE");
  if (spec.needsOutput && !output) missingFlag(spec.name, "--out PATH");
  if (input) await requireExisting(spec.name, input);
  const { config, hash } = await loadConfig({ file: values.config as string | undefined, overrides });
  return { config, configHash: hash, flags: values, input, output };
}

function missingFlag(stage: string, flag: string): never {
  throw new UserError(`${stage}: ${flag} is required`, {
    why: "the stage has nothing to read or nowhere to write without it",
    fix: `pass ${flag} (see 'deno task ${stage} --help')`,
  });
}

async function requireExisting(stage: string, path: string): Promise<void> {
  try {
    await Deno.stat(path);
  } catch {
    throw new UserError(`${stage}: input ${path} does not exist`, {
      why: "--in must name a file written by the previous stage",
      fix: "check the path, or run the previous stage first",
    });
  }
}

/** Prints one line for bad input (a stack trace only with --debug) and returns the exit code. */
export function reportFailure(stage: string, error: unknown, debug: boolean): number {
  if (error instanceof UserError) {
    console.error(debug ? error.stack : `error: ${error.message}`);
    return 2;
  }
  console.error(`${stage}: unexpected failure (a bug or an infrastructure fault):`);
  console.error(error instanceof Error ? error.stack : String(error));
  return 1;
}
