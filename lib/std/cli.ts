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
  /** Value flags that may be given more than once (`--in a --in b`): all values go to `lists`. */
  multiple?: string[];
}

export interface ParsedFlags {
  /** Named flags with values; repeated flags keep the last value. */
  values: Record<string, string | boolean | undefined>;
  /** Every value of each `multiple` flag given, in order. */
  lists: Record<string, string[]>;
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
  const options: Record<string, { type: "string" | "boolean"; multiple?: boolean }> = {};
  for (const name of spec.string ?? []) options[name] = { type: "string" };
  for (const name of spec.boolean ?? []) options[name] = { type: "boolean" };
  for (const name of spec.multiple ?? []) options[name] = { type: "string", multiple: true };
  const parsed = nodeParseArgs({ args: rest, options, allowPositionals: true, strict: true });
  const values = parsed.values as Record<string, string | string[] | boolean | undefined>;
  const lists: Record<string, string[]> = {};
  for (const name of spec.multiple ?? []) {
    const list = values[name];
    if (!Array.isArray(list)) continue;
    lists[name] = list;
    values[name] = list.at(-1);
  }
  return { values: values as ParsedFlags["values"], lists, overrides, positionals: parsed.positionals };
}
