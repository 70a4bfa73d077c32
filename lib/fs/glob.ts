/**
 * Input paths with wildcards, for stages that read several files (`--in 'runs/x/rollouts-*.arrow'`).
 *
 * Only the last path component may hold wildcards (`*` any run of characters, `?` one character, not
 * `/`); the directory part is taken literally. A pattern's matches come in name order; patterns expand
 * in the order given, and a path without wildcards is kept as it is (its existence is checked later).
 * A pattern that matches nothing is an error, never silently an empty input.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { UserError } from "../errors.ts";

/** Whether `path` holds a wildcard. */
export function hasWildcard(path: string): boolean {
  return /[*?]/.test(path);
}

/** Every path of `patterns`, wildcards expanded (in order; each pattern's matches sorted by name). */
export async function expandPaths(flag: string, patterns: readonly string[]): Promise<string[]> {
  const out: string[] = [];
  for (const pattern of patterns) {
    if (!hasWildcard(pattern)) {
      out.push(pattern);
      continue;
    }
    const matches = await matchesOf(flag, pattern);
    if (matches.length === 0) {
      throw new UserError(`${flag} ${pattern}`, {
        why: "no file matches it",
        fix:
          "check the pattern (quote it so the shell leaves it to the stage), or run the stage that writes them",
      });
    }
    out.push(...matches);
  }
  return out;
}

async function matchesOf(flag: string, pattern: string): Promise<string[]> {
  const dir = dirname(pattern);
  if (hasWildcard(dir)) {
    throw new UserError(`${flag} ${pattern}`, {
      why: "only the file name may hold wildcards (* and ?), not the directories",
      fix: "name the directory in full, e.g. --in 'runs/x/step-0001/rollouts-*.arrow'",
    });
  }
  const regex = new RegExp(`^${basename(pattern).split("").map(patternChar).join("")}$`);
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (regex.test(entry.name) && await isFileOrLinkToOne(dir, entry)) names.push(entry.name);
    }
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const prefix = pattern.startsWith(`${dir}/`) ? `${dir}/` : "";
  return names.sort().map((name) => `${prefix}${name}`);
}

function patternChar(c: string): string {
  if (c === "*") return "[^/]*";
  if (c === "?") return "[^/]";
  return c.replace(/[.+^${}()|[\]\\]/g, "\\$&");
}

/** A file, or a link to one (a shard linked in from elsewhere is a shard: a glob must not skip it silently). */
async function isFileOrLinkToOne(dir: string, entry: Deno.DirEntry): Promise<boolean> {
  if (!entry.isSymlink) return entry.isFile;
  try {
    return (await Deno.stat(join(dir, entry.name))).isFile;
  } catch {
    return false; // a dangling link: no file to read
  }
}
