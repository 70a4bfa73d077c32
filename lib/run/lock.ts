/**
 * One loop per run directory: a lock file holding the owner's pid, created exclusively. A second process
 * is refused with "run locked by pid N"; a lock whose pid is no longer alive (a killed loop) is taken over,
 * so that `--resume` after a SIGKILL works without manual cleanup.
 *
 * @module
 */

import { UserError } from "../errors.ts";

/**
 * Takes the lock at `path`; returns its release function. The lock is also released when the process
 * exits through `Deno.exit` (Ctrl-C, SIGTERM, a vanished parent: lib/cli/lifetime.ts), which
 * dispatches the `unload` event; only SIGKILL leaves it behind (taken over as stale, above).
 */
export async function acquireRunLock(path: string): Promise<() => Promise<void>> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const file = await Deno.open(path, { write: true, createNew: true });
      await file.write(new TextEncoder().encode(`${Deno.pid}\n`));
      file.close();
      const onExit = () => releaseSync(path);
      globalThis.addEventListener("unload", onExit);
      return async () => {
        globalThis.removeEventListener("unload", onExit);
        if ((await ownerOf(path)) === Deno.pid) await Deno.remove(path).catch(() => {});
      };
    } catch (error) {
      if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
      const owner = await ownerOf(path);
      if (owner !== null && owner !== Deno.pid && isAlive(owner)) {
        throw new UserError(`run locked by pid ${owner}`, {
          value: path,
          why: "another loop is running in this run directory",
          fix: `wait for pid ${owner} to finish (or stop it), or use another loop.run_dir`,
        });
      }
      await Deno.remove(path).catch(() => {}); // stale: its owner is gone
    }
  }
  throw new Error(`could not take the run lock ${path}`);
}

/** Removes the lock if this process holds it; synchronous, as an `unload` listener must be. */
function releaseSync(path: string): void {
  try {
    if (Number(Deno.readTextFileSync(path).trim()) === Deno.pid) Deno.removeSync(path);
  } catch {
    // gone already, or unreadable: nothing of ours to remove
  }
}

async function ownerOf(path: string): Promise<number | null> {
  try {
    const pid = Number((await Deno.readTextFile(path)).trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

/**
 * Whether a process with this pid exists: `kill -0` (the stages may run subprocesses; reading /proc
 * would need Deno's --allow-all).
 */
function isAlive(pid: number): boolean {
  try {
    return new Deno.Command("kill", { args: ["-0", String(pid)], stderr: "null", stdout: "null" })
      .outputSync()
      .success;
  } catch {
    return true; // cannot tell: never take over a lock that may be held
  }
}

/**
 * The pid holding the lock at `path` when that process is alive (not this one), else null: a command
 * that would delete or replace the run directory refuses while a loop holds it, and may replace a
 * stale lock left by a dead process.
 */
export async function liveLockOwner(path: string): Promise<number | null> {
  const owner = await ownerOf(path);
  return owner !== null && owner !== Deno.pid && isAlive(owner) ? owner : null;
}
