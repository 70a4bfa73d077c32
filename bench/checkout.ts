/**
 * An older revision of this repository checked out beside it, for `deno task bench --before REV`: a git
 * worktree under runs/bench/, sharing this checkout's node_modules.
 *
 * `REV+FIX[+FIX…]` applies the FIX commits on top of REV, uncommitted (`git cherry-pick --no-commit`), for an
 * older revision whose bench cannot run without a later fix (6cb990e's engine bench hangs without the
 * scheduler fix 2ea7dd8: `--before 6cb990e+2ea7dd8`). Every name is a commit a fresh clone has.
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
    for (const fix of fixes) await must(dir, ["cherry-pick", "--no-commit", fix]);
  } catch (e) {
    await git(root, ["worktree", "remove", "--force", dir]);
    throw e;
  }
  await Deno.symlink(join(root, "node_modules"), join(dir, "node_modules"));
  return dir;
}

async function git(cwd: string, args: string[]): Promise<{ ok: boolean; stderr: string }> {
  const out = await new Deno.Command("git", { args, cwd, stdout: "null", stderr: "piped" }).output();
  return { ok: out.success, stderr: new TextDecoder().decode(out.stderr).trim() };
}

async function must(cwd: string, args: string[]): Promise<void> {
  const { ok, stderr } = await git(cwd, args);
  if (!ok) throw new Error(`git ${args.join(" ")} in ${cwd}: ${stderr}`);
}
