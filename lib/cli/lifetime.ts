/**
 * When a stage stops before its work is done, other than by Ctrl-C (cli.ts): on SIGTERM, and when the
 * `deno task` process that started it is gone. `deno task loop` runs the stage as a child process;
 * a SIGKILL of that wrapper cannot be caught or forwarded, so without this the child would run on alone,
 * holding its run lock. Both stop the stage as Ctrl-C does: one line on stderr, exit (143 for SIGTERM,
 * 129 for a vanished parent), outputs untouched (every file is written to a temporary name and renamed,
 * lib/fs/atomic.ts), and the run lock released (lib/run/lock.ts releases it on exit).
 *
 * The parent is watched by polling `Deno.ppid` (every half second, on a timer that never keeps the
 * process alive): a child whose parent died is re-parented, so its parent pid changes. Linux's
 * `prctl(PR_SET_PDEATHSIG)` would need `--allow-ffi`, which score and mask do not have, and exists on
 * Linux only. Only stages started by `deno task` are watched: a stage run directly and detached on
 * purpose (`nohup deno run ... &`, then the shell exits) keeps running. SIGTERM is what `deno task`
 * forwards when it receives one (measured with Deno 2.9), so it arrives here either way. Through npx
 * (`npm exec` → `sh -c` → `deno task` → the stage), `npm exec` and its `sh -c` forward nothing and die
 * alone on a SIGTERM, leaving `deno task` re-parented and the stage running: so a stage started through
 * npx also watches its `deno task` parent's own parent, read from /proc through libc (proc_parent.ts; only
 * stages with `--allow-ffi` can, which serve, loop, rollout, train, eval, demo and report have; score and
 * mask stop with their `deno task` only).
 *
 * @module
 */

import { parentPidOf } from "./proc_parent.ts";

/** Exit code of a stage stopped by SIGTERM (128 + 15, as the shell reports it). */
export const EXIT_SIGTERM = 143;
/** Exit code of a stage whose `deno task` parent is gone (128 + 1, as for a hang-up). */
export const EXIT_ORPHANED = 129;

const PARENT_CHECK_MS = 500;

/** The parent at start, read as the module loads: the earliest moment, before any slow preparation. */
const parentAtStart = Deno.ppid;

/** Stops the stage on SIGTERM, and when its `deno task` parent is gone (see the module comment). */
export function stopWithParent(stage: string, resumeHint?: string): void {
  const stop = (cause: string, code: number) => {
    try {
      console.error(
        `${stage}: ${cause}; no partial output was written (earlier outputs are intact). ` +
          (resumeHint ?? "Run the same command again to redo the stage."),
      );
    } catch {
      // stderr may have closed with the parent; stop all the same
    }
    Deno.exit(code);
  };
  if (Deno.build.os !== "windows") {
    Deno.addSignalListener("SIGTERM", () => stop("stopped by SIGTERM", EXIT_SIGTERM));
  }
  if (!startedByDenoTask()) return;
  const wrapper = startedByNpx() ? parentPidOf(parentAtStart) : null;
  const timer = setInterval(() => {
    if (Deno.ppid !== parentAtStart) {
      stop(`stopped: its parent process (pid ${parentAtStart}, deno task) is gone`, EXIT_ORPHANED);
    }
    // `deno task` re-parented: the npx above it is gone (a vanished deno task reads null: handled above).
    const now = wrapper === null ? null : parentPidOf(parentAtStart);
    if (now !== null && now !== wrapper) {
      stop(
        `stopped: the npx above its deno task is gone (deno task's parent, pid ${wrapper}, exited)`,
        EXIT_ORPHANED,
      );
    }
  }, PARENT_CHECK_MS);
  Deno.unrefTimer(timer);
}

/** Whether npx (`npm exec`) started the `deno task` that started this process. */
function startedByNpx(): boolean {
  try {
    return Deno.env.get("npm_command") === "exec";
  } catch {
    return false;
  }
}

/**
 * Whether `deno task` started this process: it sets npm's user-agent variable to `deno/<version> ...`,
 * unless npx (`npm exec`, which sets `npm_command=exec`) already set it, as the README's
 * `npx -y deno@2.9.6 task …` does: `deno task` keeps npm's value there.
 */
function startedByDenoTask(): boolean {
  try {
    return (Deno.env.get("npm_config_user_agent")?.startsWith("deno/") ?? false) || startedByNpx();
  } catch {
    return false; // no --allow-env: cannot tell, so do not watch
  }
}
