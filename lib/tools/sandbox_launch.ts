/**
 * How a jailed process is launched, shared by the code sandbox (sandbox.ts) and MCP servers under
 * bubblewrap (lib/tools/mcp/launch.ts): the programs it needs (bwrap; setpriv when we are root, because
 * root is exempt from RLIMIT_NPROC and the jail then runs as `nobody`), the seccomp filter bwrap reads
 * from a descriptor, and the command line that puts them together. docs/sandbox.md says why each is there.
 *
 * @module
 */

import { SandboxUnavailableError } from "./sandbox_error.ts";
import { findExecutable } from "./sandbox_command.ts";
import { seccompFilter } from "./sandbox_seccomp.ts";

export interface BwrapWrapper {
  bwrap: string;
  setpriv?: string;
  /** The jail's seccomp filter (sandbox_seccomp.ts), where the architecture has one. */
  seccomp?: Uint8Array;
}

/** The filter's file name in a run's host directory (a name no program file can have) and its descriptor. */
export const SECCOMP_FILE = ".seccomp.bpf";
const SECCOMP_FD = 3;

/** bwrap, setpriv when we are root, the seccomp filter; SandboxUnavailableError when one is missing. */
export async function bwrapWrapper(): Promise<BwrapWrapper> {
  const bwrap = await requireExecutable("bwrap", "bubblewrap");
  // Root is exempt from RLIMIT_NPROC; an unprivileged user namespace makes the process limit count.
  const setpriv = await isRoot() ? await requireExecutable("setpriv", "util-linux") : undefined;
  return { bwrap, setpriv, seccomp: seccompFilter() };
}

/** Effective uid 0: the owner of a file we create (Deno.uid() would need --allow-sys). */
export async function isRoot(): Promise<boolean> {
  const probe = await Deno.makeTempFile({ prefix: "sandbox-uid-" });
  try {
    return (await Deno.stat(probe)).uid === 0;
  } finally {
    await Deno.remove(probe);
  }
}

export async function requireExecutable(name: string, debianPackage: string): Promise<string> {
  const path = await findExecutable(name);
  if (path === undefined) {
    throw new SandboxUnavailableError(`sandbox: ${name}`, {
      why: `${name} is not installed or not on PATH`,
      fix: `install it (Debian/Ubuntu: apt-get install ${debianPackage})`,
    });
  }
  return path;
}

/** The descriptor bwrap's `--seccomp` reads, when the wrapper has a filter. */
export function seccompFd(wrap: BwrapWrapper): number | undefined {
  return wrap.seccomp === undefined ? undefined : SECCOMP_FD;
}

/**
 * The full command line: bwrap with `bwrapArgs`, run as nobody when we are root, and — when there is a
 * filter — through a shell that opens `seccompPath` as the descriptor bwrap reads (before setpriv drops
 * us), then execs.
 */
export function launchArgv(wrap: BwrapWrapper, bwrapArgs: string[], seccompPath: string): string[] {
  const drop = wrap.setpriv === undefined
    ? []
    : [wrap.setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"];
  const argv = [...drop, wrap.bwrap, ...bwrapArgs];
  if (wrap.seccomp === undefined) return argv;
  return ["/bin/sh", "-c", `exec "$@" ${SECCOMP_FD}<"$0"`, seccompPath, ...argv];
}
