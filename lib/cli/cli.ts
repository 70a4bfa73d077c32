/**
 * The thin `main` shared by every stage script: flags, config, argument checks, one-line errors, exit
 * codes. A stage is a pure function plus this wrapper.
 *
 * For a new stage, declare in its `StageSpec`:
 * - `input`: the kind of stage file `--in` must be (checked: exists, a file, its manifest names the kind);
 * - `manyInputs`: `--in` may repeat or be a glob (lib/fs/glob.ts); every file is checked and the list
 *   comes in `args.inputs` (read them as one with lib/arrow/merge.ts `readStageFiles`);
 * - `output`: what `--out` is (`{ kind: "stage-file", fileKind: "scored" }`, `{ kind: "adapter-dir" }`,
 *   `{ kind: "run-dir" }`, `{ kind: "model-dir" }`, `{ kind: "html" }`); `runStageMain` applies the
 *   output policy of docs/outputs.md before `run` (refuses `.`, inputs, foreign files; an existing
 *   output of ours only with `--overwrite`), so `run` may write `args.output` without asking again;
 * - `usesModel`: `model.path` (and `model.adapter` when set) are checked to be model / adapter dirs;
 *   the default model (lib/model/default_model.ts) is made only after every check passed;
 * - `check`: the stage's own checks (the tasks of a step, a run directory and its lock), run after the
 *   common ones and before anything is written; it may set `args.output` (the report's default);
 * - `takesOverwrite`: the stage replaces an output named by the configuration (the loop's run directory)
 *   and takes `--overwrite` without taking `--out`;
 * - `configFlags`: flags that are another name for a config key (`adapter: "model.adapter"`);
 * - `examples`: command lines shown under "Examples" in `--help` (a test runs each through the config
 *   loader, so they must use keys that exist).
 * Every stage takes `--config`, `--print-config` (print the resolved configuration and exit), `--debug`
 * and `--help`; `--in` only where it reads stage files, `--out` and `--overwrite` only where it writes
 * one, so a flag the stage would ignore is refused. Once every check passed, the default model is made
 * (when `model.path` is the default and absent) and the output's missing parent directories are
 * created; then `run` starts. Library code that writes outputs itself (the loop's step files) calls
 * `checkOutputPath` (re-exported here) with the same policy, and reports progress through `progress`.
 *
 * Exit codes: 0 done, 2 bad input, 130 interrupted, 1 an infrastructure fault (one line: a sandbox or an
 * MCP server that cannot start or died) or an unexpected fault (stack trace shown).
 */
import { stringify } from "@std/yaml";
import { InfrastructureError, UserError } from "../errors.ts";
import { configHelp, DEFAULT_CONFIG_FILE, loadConfig } from "../config/load.ts";
import type { Config } from "../config/schema.ts";
import type { StageKind } from "../arrow/kinds.ts";
import { checkOutputPath, createOutputParents, type OutputSpec } from "../fs/output.ts";
import { expandPaths } from "../fs/glob.ts";
import { parseCommandLine } from "./args.ts";
import { checkAdapterDir, checkDistinctInputs, checkInputFile, checkModelDir } from "./check.ts";
import { defaultModelMissing, ensureDefaultModel } from "../model/default_model.ts";
import { progress } from "../progress.ts";
import { stopWithParent } from "./lifetime.ts";
import { checkMcpServers, mcpPaths } from "../tools/mcp/check.ts";
import { checkProviderStarts, noteSoftwareDevice } from "../ort/provider_check.ts";

export { checkOutputPath, type OutputSpec } from "../fs/output.ts";
export { progress } from "../progress.ts";

export interface StageArgs {
  /** Resolved, validated configuration (file plus overrides). */
  config: Config;
  /** sha256 of the resolved configuration, written into every output's metadata. */
  configHash: string;
  /** Named flags other than the common ones. */
  flags: Record<string, string | boolean | undefined>;
  /** Every value of each repeatable flag (`multipleFlags`), in order. */
  lists: Record<string, string[]>;
  input?: string;
  /** Every `--in` file, globs expanded, in order (`[input]` for a stage without `manyInputs`). */
  inputs: string[];
  output?: string;
  /** `--overwrite`: an existing output of ours may be replaced (already checked by runStageMain). */
  overwrite?: boolean;
  /** The configuration file read (`--config`, or the repository's config.yaml). */
  configFile: string;
}

export interface StageSpec {
  /** Stage name as in `deno task NAME`. */
  name: string;
  /** One paragraph: what the stage reads and writes. */
  summary: string;
  /** Extra flags beyond the common ones. */
  stringFlags?: string[];
  /** Extra value flags that may repeat (their values in `StageArgs.lists`). */
  multipleFlags?: string[];
  booleanFlags?: string[];
  /** Help lines for the extra flags. */
  flagHelp?: string[];
  /** Flags that set a config key: `{ adapter: "model.adapter" }` makes `--adapter X` `--model.adapter=X`. */
  configFlags?: Record<string, string>;
  /** Whether --in and --out are required. */
  needsInput?: boolean;
  needsOutput?: boolean;
  /** The kind of stage file --in must be. */
  input?: StageKind;
  /** Whether --in may be given more than once or as a glob (the files are read as one, in order). */
  manyInputs?: boolean;
  /** What --out is; without it --out is checked only by the common rules for a stage file. */
  output?: OutputSpec;
  /** Whether the stage loads the model (`model.path`, `model.adapter` checked before run). */
  usesModel?: boolean;
  /** The stage's own checks, after the common ones and before anything is written (may set output). */
  check?(args: StageArgs): Promise<void>;
  /** Takes `--overwrite` for an output the configuration names (the loop's run directory). */
  takesOverwrite?: boolean;
  /** What Ctrl-C tells the user to do next (default: run the same command again). */
  resumeHint?: string;
  /** Example command lines for `--help`. */
  examples?: string[];
  run(args: StageArgs): Promise<void>;
}

const COMMON_STRING = ["config"];
const COMMON_BOOLEAN = ["help", "debug", "print-config"];

/** Whether the stage reads `--in` stage files. */
function readsIn(spec: StageSpec): boolean {
  return Boolean(spec.needsInput || spec.manyInputs || spec.input);
}

/** Whether the stage writes `--out`. */
function writesOut(spec: StageSpec): boolean {
  return Boolean(spec.needsOutput || spec.output);
}

/** Usage text for `--help`. */
export function stageHelp(spec: StageSpec): string {
  const inOut = [
    ...(readsIn(spec) ? [" [--in FILE]"] : []),
    ...(writesOut(spec) ? [" [--out PATH]"] : []),
  ].join("");
  const lines = [
    `deno task ${spec.name}${inOut} [--config FILE] [--section.key=value ...]`,
    "",
    spec.summary,
    "",
    "Flags:",
    ...(readsIn(spec)
      ? [
        "  --in FILE        input stage file" + (spec.needsInput ? " (required)" : "") +
        (spec.manyInputs ? "; repeat it, or quote a glob, to read several as one (in that order)" : ""),
      ]
      : []),
    ...(writesOut(spec)
      ? ["  --out PATH       output file or directory" + (spec.needsOutput ? " (required)" : "")]
      : []),
    ...(writesOut(spec) || spec.takesOverwrite
      ? [
        "  --overwrite      replace an existing output written earlier by this toolkit (never anything else)",
      ]
      : []),
    "  --config FILE    configuration file (default: the repository's config.yaml)",
    "  --a.b=VALUE      override one configuration key, e.g. --rollout.generation.temperature=0.7",
    "  --print-config   print the resolved configuration and exit without reading or writing",
    "  --debug          show stack traces",
    "  --help           this text",
    ...(spec.flagHelp ?? []).map((line) => `  ${line}`),
    ...(spec.examples?.length ? ["", "Examples:", ...spec.examples.map((e) => `  ${e}`)] : []),
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
    const prepared = await prepareStage(spec, argv);
    if (prepared === "done") Deno.exit(0);
    exitOnInterrupt(spec.name, spec.resumeHint);
    stopWithParent(spec.name, spec.resumeHint); // SIGTERM, or the deno task wrapper killed (lifetime.ts)
    await spec.run(prepared);
    Deno.exit(0);
  } catch (error) {
    Deno.exit(reportFailure(spec.name, error, debug));
  }
}

/**
 * Everything before the work: parses `argv`, answers `--help` and `--print-config` (returns "done"),
 * loads the configuration and checks every argument; only then makes the default model and the output's
 * missing parent directories. Throws a UserError on the first bad argument, having written nothing.
 */
export async function prepareStage(spec: StageSpec, argv: string[]): Promise<StageArgs | "done"> {
  const command = `deno task ${spec.name}`;
  const { values, lists, overrides } = parseCommandLine(argv, {
    command,
    string: [
      ...COMMON_STRING,
      ...(writesOut(spec) ? ["out"] : []),
      ...(spec.stringFlags ?? []),
      ...Object.keys(spec.configFlags ?? {}),
    ],
    boolean: [
      ...COMMON_BOOLEAN,
      ...(writesOut(spec) || spec.takesOverwrite ? ["overwrite"] : []),
      ...(spec.booleanFlags ?? []),
    ],
    multiple: [...(readsIn(spec) ? ["in"] : []), ...(spec.multipleFlags ?? [])],
  });
  if (values.help) {
    console.log(stageHelp(spec));
    return "done";
  }
  for (const [flag, key] of Object.entries(spec.configFlags ?? {})) {
    if (typeof values[flag] === "string") overrides.push([key, values[flag] as string]);
  }
  const configFile = values.config as string | undefined;
  const { config, hash } = await loadConfig({ file: configFile, overrides });
  if (values["print-config"]) {
    console.log(`# config hash ${hash}\n${stringify(config)}`);
    return "done";
  }
  const inputs = await inputPaths(spec, lists.in ?? []);
  const args: StageArgs = {
    config,
    configHash: hash,
    flags: values,
    lists: Object.fromEntries((spec.multipleFlags ?? []).map((f) => [f, lists[f] ?? []])),
    input: inputs[0],
    inputs,
    output: values.out as string | undefined,
    overwrite: values.overwrite === true,
    configFile: configFile ?? DEFAULT_CONFIG_FILE,
  };
  await checkArguments(spec, args);
  await spec.check?.(args);
  // Every check passed: only now may the command create anything.
  if (spec.usesModel) await ensureDefaultModel(config.model.path, (line) => progress.log(line));
  if (args.output) await createOutputParents(args.output);
  return args;
}

/**
 * The paths a command reads, which its output may not be, hold or lie inside: `--in` files, the config
 * file, `model.adapter`, and for a stage that loads the model `model.path`, `data.path`, (with the
 * read_file tool) `rollout.tools.read_file_root` and the paths given to MCP servers.
 */
export function inputsOf(args: StageArgs, usesModel: boolean): Array<string | null | undefined> {
  const { model, data, rollout } = args.config;
  const readFile = rollout.tools.enabled.includes("read_file");
  const mcp = mcpPaths(rollout.tools.mcp);
  return [
    ...args.inputs,
    args.configFile,
    model.adapter,
    ...(usesModel ? [model.path, data.path, readFile ? rollout.tools.read_file_root : null, ...mcp] : []),
  ];
}

/** Paths exist and have the right kind, the model and adapter look right, the output may be written. */
async function checkArguments(spec: StageSpec, args: StageArgs): Promise<void> {
  if (spec.needsInput && !args.input) missingFlag(spec.name, "--in FILE");
  if (spec.needsOutput && !args.output) missingFlag(spec.name, "--out PATH");
  for (const input of args.inputs) await checkInputFile("--in", input, spec.input);
  if (args.inputs.length > 1) await checkDistinctInputs("--in", args.inputs);
  const { model } = args.config;
  if (spec.usesModel) {
    // The default model, when absent, is made after every check (prepareStage), not checked here.
    if (!(await defaultModelMissing(model.path))) await checkModelDir("model.path", model.path);
    if (model.adapter) await checkAdapterDir("model.adapter", model.adapter);
    await checkMcpServers(args.config.rollout.tools.mcp);
    // The provider must start before a model loads; rollouts and evaluations on servers run no engine here.
    const remote = model.backend !== "local" && (spec.name === "rollout" || spec.name === "eval");
    if (!remote) {
      checkProviderStarts(model.ep);
      noteSoftwareDevice(model.ep);
    }
  }
  if (args.output) {
    await checkOutputPath(args.output, spec.output ?? { kind: "stage-file", fileKind: "unknown" }, {
      inputs: inputsOf(args, spec.usesModel ?? false),
      overwrite: args.overwrite,
    });
  }
}

/** The `--in` paths: globs expanded when the stage takes several, else at most one, taken literally. */
async function inputPaths(spec: StageSpec, given: string[]): Promise<string[]> {
  if (spec.manyInputs) return await expandPaths("--in", given);
  if (given.length > 1) {
    throw new UserError(`deno task ${spec.name}: --in`, {
      value: given.join(" "),
      why: "this stage reads one input file",
      fix: "pass --in once",
    });
  }
  return given;
}

/**
 * Ctrl-C: one line and exit 130. Every output is written to a temporary name and renamed into place,
 * so an interrupted stage leaves its previous outputs intact (or none), never a partial file.
 */
function exitOnInterrupt(stage: string, resumeHint?: string): void {
  Deno.addSignalListener("SIGINT", () => {
    console.error(
      `${stage}: interrupted; no partial output was written (earlier outputs are intact). ` +
        (resumeHint ?? "Run the same command again to redo the stage."),
    );
    Deno.exit(130);
  });
}

function missingFlag(stage: string, flag: string): never {
  throw new UserError(`${stage}: ${flag} is required`, {
    why: "the stage has nothing to read or nowhere to write without it",
    fix: `pass ${flag} (see 'deno task ${stage} --help')`,
  });
}

/**
 * Prints one line for bad input (exit 2) and for an infrastructure fault (exit 1), a stack trace only
 * with --debug; anything else is a bug: its stack trace, exit 1.
 */
export function reportFailure(stage: string, error: unknown, debug: boolean): number {
  if (error instanceof UserError) {
    console.error(debug ? error.stack : `error: ${error.message}`);
    return 2;
  }
  if (error instanceof InfrastructureError) {
    const line = error.message.replace(/\s*\n\s*/g, " ");
    console.error(debug ? error.stack : `${stage}: infrastructure fault: ${line}`);
    return 1;
  }
  console.error(`${stage}: unexpected failure (a bug or an infrastructure fault):`);
  console.error(error instanceof Error ? error.stack : String(error));
  return 1;
}
