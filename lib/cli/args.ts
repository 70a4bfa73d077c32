/**
 * Command-line parsing shared by the stages, the demo and the tools: declared flags, `--a.b=value`
 * config overrides, and one-line errors for everything else (unknown flags, stray positional
 * arguments, a flag without its value). A value that starts with `-` (`--hidden -5`) is taken as the
 * flag's value rather than read as another flag, so a negative number reaches the check that explains
 * why it is wrong.
 *
 * @module
 */

import { parseArgs, type ParsedFlags } from "@std/cli";
import { UserError } from "../errors.ts";

export interface CommandLineSpec {
  /** The command as the user types it, for messages (`deno task train`). */
  command: string;
  string?: string[];
  boolean?: string[];
  /** Value flags that may repeat (their values come back in `lists`). */
  multiple?: string[];
}

/** Parses `argv`; refuses unknown flags and positional arguments with one line naming them. */
export function parseCommandLine(argv: string[], spec: CommandLineSpec): ParsedFlags {
  const joined = joinDashValues(argv, [...(spec.string ?? []), ...(spec.multiple ?? [])]);
  let parsed: ParsedFlags;
  try {
    parsed = parseArgs(joined, { string: spec.string, boolean: spec.boolean, multiple: spec.multiple });
  } catch (error) {
    throw new UserError(`${spec.command}: bad command line`, {
      why: explain((error as Error).message),
      fix: `run '${spec.command} --help' for the flags`,
    });
  }
  if (parsed.positionals.length > 0) {
    throw new UserError(`${spec.command}: unexpected argument`, {
      value: parsed.positionals.join(" "),
      why: "the command takes only flags (--name VALUE, --section.key=VALUE)",
      fix: `remove it, or name its flag (run '${spec.command} --help' for the flags)`,
    });
  }
  return parsed;
}

/** `--flag -5` → `--flag=-5` for declared value flags, so the value is not read as a flag. */
function joinDashValues(argv: string[], stringFlags: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const name = /^--([\w-]+)$/.exec(argv[i])?.[1];
    const next = argv[i + 1];
    if (name && stringFlags.includes(name) && next !== undefined && /^-[^-]/.test(next)) {
      out.push(`--${name}=${next}`);
      i++;
    } else out.push(argv[i]);
  }
  return out;
}

/** node:util's messages, in the toolkit's words. */
function explain(message: string): string {
  const unknown = /Unknown option '([^']+)'/.exec(message);
  if (unknown) return `unknown flag ${unknown[1]}`;
  const missing = /Option '(--[\w-]+)[^']*' argument missing/.exec(message);
  if (missing) return `${missing[1]} needs a value`;
  const noValue = /Option '(--[\w-]+)' does not take an argument/.exec(message);
  if (noValue) return `${noValue[1]} is on or off and takes no value`;
  return message.split("\n")[0].replace(/\.$/, "");
}
