/**
 * Running the toolkit's commands as a user does, from any working directory, for tests of what a command
 * refuses or writes: `command` runs a script of the repository in a child process with the permission
 * flags of the deno.json task that runs it (`deno task mask` has no `--allow-all`, so neither has the
 * test: Deno refuses /proc, /sys and /dev paths under the task's flags but not under `-A`), with a time limit, so
 * a command that would block, e.g. reading a FIFO, fails the test instead of hanging it), `assertRefused`
 * checks the one-line refusal, `treeHash` fingerprints a directory to prove nothing changed, and
 * `readOnlyDir` makes a directory read-only in a way that stops root too.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import { fileURLToPath } from "node:url";

/** The repository root. */
export const ROOT = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CommandOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** Kill the child after this many milliseconds (default 120 s). */
  timeoutMs?: number;
  /** Run the command line through this prefix (e.g. `unshare -m sh -c …`). */
  prefix?: string[];
}

/** Runs `script` (a path below the repository) with `args`; never throws on a failing exit. */
export async function command(
  script: string,
  args: string[],
  opts: CommandOptions = {},
): Promise<CommandResult> {
  const line = [Deno.execPath(), ...denoRunArgs(script), ...args];
  const [program, ...rest] = [...(opts.prefix ?? []), ...line];
  const out = await new Deno.Command(program, {
    args: rest,
    cwd: opts.cwd ?? ROOT,
    env: { NO_COLOR: "1", ...opts.env },
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(opts.timeoutMs ?? 120_000),
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/**
 * `run FLAGS --quiet SCRIPT` for `deno`: FLAGS are the permission flags of the deno.json task that runs
 * `script` (a path below the repository, e.g. `stages/mask.ts`), so a test meets what a user of
 * `deno task` meets; a script no task runs (a test fixture) gets `-A`.
 */
export function denoRunArgs(script: string): string[] {
  return ["run", ...(taskFlags(script) ?? ["-A"]), "--quiet", join(ROOT, script)];
}

/**
 * The flags between `deno run` and `script` in the deno.json task that runs it (after any `NAME=value` the
 * task sets first), or null when none does.
 */
export function taskFlags(script: string): string[] | null {
  const tasks: Record<string, string> = JSON.parse(Deno.readTextFileSync(join(ROOT, "deno.json"))).tasks;
  for (const line of Object.values(tasks)) {
    const words = line.trim().split(/\s+/);
    while (/^\w+=/.test(words[0] ?? "")) words.shift(); // NAME=value before the command
    if (words[0] === "deno" && words[1] === "run" && words.at(-1) === script) return words.slice(2, -1);
  }
  return null;
}

/** `command("stages/NAME.ts", …)`. */
export function stage(name: string, args: string[], opts: CommandOptions = {}): Promise<CommandResult> {
  return command(`stages/${name}.ts`, args, opts);
}

/** Exit 2, exactly one line on stderr matching `pattern`, no stack trace. */
export function assertRefused(r: CommandResult, pattern: RegExp, what = ""): void {
  const lines = r.stderr.split("\n").filter((l) => l.trim() !== "");
  assert.equal(r.code, 2, `${what} exit ${r.code}: ${r.stderr}`);
  assert.equal(lines.length, 1, `${what}: ${r.stderr}`);
  assert.match(lines[0], pattern, what);
  assert.doesNotMatch(r.stderr, /\bat .*\.ts:\d+/, what);
}

/** sha256 over every path and file content below `dir` (symlinks not followed). */
export async function treeHash(dir: string): Promise<string> {
  const parts: string[] = [];
  async function walk(d: string): Promise<void> {
    const entries = [];
    for await (const e of Deno.readDir(d)) entries.push(e);
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      const p = join(d, e.name);
      parts.push(relative(dir, p));
      if (e.isDirectory) await walk(p);
      else if (e.isFile) parts.push(await sha256Hex(await Deno.readFile(p)));
    }
  }
  await walk(dir);
  return await sha256Hex(new TextEncoder().encode(parts.join("\n")));
}

/** Whether anything is at `path`. */
export async function exists(path: string): Promise<boolean> {
  return await Deno.lstat(path).then(() => true, () => false);
}

/**
 * A prefix under which `dir` is read-only for the command, or null where this machine cannot make one.
 * As root (where permission bits stop nothing) a read-only bind mount in a private mount namespace
 * (`unshare -m`); otherwise `chmod 555`.
 */
export async function readOnlyDir(dir: string): Promise<string[] | null> {
  if (Deno.uid() !== 0) {
    await Deno.chmod(dir, 0o555);
    return [];
  }
  const prefix = ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', dir];
  try {
    const probe = await new Deno.Command(prefix[0], {
      args: [...prefix.slice(1), "sh", "-c", `! touch "${dir}/.probe" 2>/dev/null`],
      stdout: "null",
      stderr: "null",
    }).output();
    return probe.success ? prefix : null;
  } catch {
    return null; // no unshare here
  }
}
