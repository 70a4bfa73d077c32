/**
 * An older revision of this repository checked out beside it, for `deno task bench --before REV`: a git
 * worktree under runs/bench/, sharing this checkout's node_modules.
 *
 * `REV+FIX[+FIX…]` applies the FIX commits' changes on top of REV, uncommitted, for an older revision whose
 * bench cannot run without a later fix (6cb990e's engine bench hangs without the scheduler fix 2ea7dd8:
 * `--before 6cb990e+2ea7dd8`). Only the code of a fix is applied, not its Markdown: a fix's lines in an
 * append-only document (docs/RELIABILITY.md) rarely apply to an older revision's copy, and a bench reads no
 * document. Every name is a commit a fresh clone has.
 *
 * @module
 */

import { join } from "node:path";
import { UserError } from "../lib/errors.ts";

/** The commits of a `--before` value, each checked to exist; a one-line UserError before any work. */
export async function beforeCommits(root: string, spec: string): Promise<{ rev: string; fixes: string[] }> {
  const names = spec.split("+");
  for (const name of names) {
    if (
      !/^[\w./-]+$/.test(name) ||
      !(await git(root, ["rev-parse", "--verify", "--quiet", `${name}^{commit}`])).ok
    ) {
      throw new UserError("deno task bench: --before", {
        value: spec,
        why: `${JSON.stringify(name)} is not a commit of this repository`,
        fix: "pass REV or REV+FIX[+FIX…], each a commit (git log --oneline names them)",
      });
    }
  }
  return { rev: names[0], fixes: names.slice(1) };
}

/** The worktree of `spec` (made on first use, reused after); its path. */
export async function checkoutBefore(root: string, spec: string): Promise<string> {
  const { rev, fixes } = await beforeCommits(root, spec);
  const dir = join(root, "runs", "bench", `before-${spec.replace(/[^\w.-]/g, "_")}`);
  try {
    await Deno.stat(join(dir, "deno.json"));
    return dir;
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  await must(root, ["worktree", "add", "--detach", dir, rev]);
  try {
    for (const fix of fixes) await applyCode(root, dir, fix);
  } catch (e) {
    await git(root, ["worktree", "remove", "--force", dir]);
    throw e;
  }
  await Deno.symlink(join(root, "node_modules"), join(dir, "node_modules"));
  return dir;
}

/** FIX's changes to every file but Markdown, applied to the worktree `dir` (not committed). */
async function applyCode(root: string, dir: string, fix: string): Promise<void> {
  const diff = await git(root, ["diff", "--binary", `${fix}^1`, fix, "--", ".", ":(exclude)*.md"]);
  if (!diff.ok) throw new Error(`git diff ${fix}: ${diff.stderr}`);
  const apply = await git(dir, ["apply", "--index", "-"], diff.stdout);
  if (!apply.ok) throw new Error(`--before: ${fix}'s code does not apply to ${dir}: ${apply.stderr}`);
}

async function git(
  cwd: string,
  args: string[],
  stdin?: Uint8Array,
): Promise<{ ok: boolean; stdout: Uint8Array; stderr: string }> {
  const child = new Deno.Command("git", {
    args,
    cwd,
    stdin: stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin) {
    const writer = child.stdin.getWriter();
    await writer.write(stdin);
    await writer.close();
  }
  const out = await child.output();
  return { ok: out.success, stdout: out.stdout, stderr: new TextDecoder().decode(out.stderr).trim() };
}

async function must(cwd: string, args: string[]): Promise<void> {
  const { ok, stderr } = await git(cwd, args);
  if (!ok) throw new Error(`git ${args.join(" ")} in ${cwd}: ${stderr}`);
}
