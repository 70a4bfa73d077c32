/**
 * Stand-in for `jsr:@std/cli`: JSR is unreachable from our machines, so flags go through
 * `node:util` parseArgs. Only what the stages use is exposed.
 */
import { parseArgs as nodeParseArgs } from "node:util";

export interface FlagSpec {
  /** Flags that take a value (`--in FILE`). */
  string?: string[];
  /** Flags that are on or off (`--help`). */
  boolean?: string[];
}

export interface ParsedFlags {
  /** Named flags with values; repeated flags keep the last value. */
  values: Record<string, string | boolean | undefined>;
  /** `--section.key=value` overrides, in order of appearance. */
  overrides: Array<[string, string]>;
  /** Positional arguments. */
  positionals: string[];
}

/**
 * Parses `args`: declared flags go to `values`; any `--a.b=value` (dotted name) is a config override.
 * An undeclared, undotted flag throws the parseArgs error (the caller turns it into a one-line message).
 */
export function parseArgs(args: string[], spec: FlagSpec): ParsedFlags {
  const overrides: Array<[string, string]> = [];
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    const dotted = /^--([A-Za-z_][\w-]*(?:\.[A-Za-z_][\w-]*)+)(?:=(.*))?$/s.exec(arg);
    if (!dotted) {
      rest.push(arg);
      continue;
    }
    const value = dotted[2] ?? args[++i];
    if (value === undefined) throw new Error(`override --${dotted[1]} needs a value: --${dotted[1]}=VALUE`);
    overrides.push([dotted[1], value]);
  }
  const options: Record<string, { type: "string" | "boolean" }> = {};
  for (const name of spec.string ?? []) options[name] = { type: "string" };
  for (const name of spec.boolean ?? []) options[name] = { type: "boolean" };
  const parsed = nodeParseArgs({ args: rest, options, allowPositionals: true, strict: true });
  return { values: parsed.values as ParsedFlags["values"], overrides, positionals: parsed.positionals };
}
