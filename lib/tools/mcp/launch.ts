/**
 * How a stdio MCP server is started (docs/mcp.md, docs/sandbox.md "MCP servers"):
 *
 * - `sandbox: bwrap`: in the code sandbox's jail (no network, every namespace new, read-only `/usr`,
 *   fresh `/tmp` and home, the seccomp filter, killed with us), but with no time limit: the server lives
 *   as long as the rollout (or its episode). It sees the host's files only at the declared paths —
 *   `read_only` and `read_write`, bound at the same absolute paths — and starts in the working
 *   directory's path, so relative arguments mean what they mean outside. Its program, when not under
 *   `/usr`, is bound read-only too (as root, where the jail runs as `nobody`, a copy any user can run,
 *   made as for execute_code: lib/tools/sandbox_binary.ts). Memory (RLIMIT_DATA), processes and file
 *   size are limited.
 * - `sandbox: none`: as you, in your working directory, in its own process group (killed whole), with
 *   the memory limit only.
 *
 * Either way its environment holds `PATH`, `HOME`, `LANG` and the entry's `env`, nothing else.
 *
 * @module
 */

import { isAbsolute, resolve } from "node:path";
import { UserError } from "../../errors.ts";
import type { McpServerConfig } from "../../config/sections/mcp.ts";
import { cachedBinary, DEFAULT_BINARY_CACHE, reachableByAnyone } from "../sandbox_binary.ts";
import { baseEnv, findExecutable, jailArgs, jailEnd, SANDBOX_HOME } from "../sandbox_command.ts";
import {
  type BwrapWrapper,
  bwrapWrapper,
  launchArgv,
  requireExecutable,
  SECCOMP_FILE,
  seccompFd,
} from "../sandbox_launch.ts";
import type { ServerProcessSpec } from "./process.ts";

/** Processes and threads a jailed server may run (Node alone starts about a dozen threads). */
const MAX_PROCESSES = 256;
/** Size of the jail's fresh `/tmp`, `/dev/shm` and home, each. */
const TMPFS_BYTES = 64 * 1024 ** 2;
/** Largest file a jailed server may write (RLIMIT_FSIZE). */
const MAX_FILE_BYTES = 1024 ** 3;

export interface LaunchOptions {
  /** Relative paths (command, read_only, read_write, args) resolve against it; default the working dir. */
  baseDir?: string;
  /** Where a copy of a binary the jail's user cannot reach goes, as root (default /var/cache/deno-rl). */
  binaryCacheDir?: string;
}

/** A process spec to start, and what to remove once the server is running or gone. */
export interface Launch {
  spec: ServerProcessSpec;
  cleanup(): Promise<void>;
}

/** The command line, environment and clean-up of one start of `server` (a stdio server). */
export async function launchSpec(server: McpServerConfig, o: LaunchOptions = {}): Promise<Launch> {
  const baseDir = o.baseDir ?? Deno.cwd();
  const command = await resolveCommand(server, baseDir);
  const prlimit = await requireExecutable("prlimit", "util-linux");
  const limits = [`--data=${server.memory_mb * 1024 ** 2}`, "--core=0"];
  if (server.sandbox === "none") {
    const setsid = await requireExecutable("setsid", "util-linux");
    const env = { ...hostEnv(), ...server.env };
    const args = [prlimit, ...limits, "--", command, ...server.args];
    const spec = { command: setsid, args, cwd: baseDir, env, killGroup: true, startMarker: false };
    return { spec, cleanup: () => Promise.resolve() };
  }
  const wrap = await bwrapWrapper();
  const program = await reachableProgram(command, wrap, o.binaryCacheDir ?? DEFAULT_BINARY_CACHE);
  const inner = [prlimit, ...limits, `--nproc=${MAX_PROCESSES}`, `--fsize=${MAX_FILE_BYTES}`, "--"];
  const binds = await declaredBinds(server, baseDir);
  const args = [...jailArgs(TMPFS_BYTES), "--dir", baseDir, ...binds];
  const fd = seccompFd(wrap);
  if (fd !== undefined) args.push("--seccomp", String(fd));
  if (!program.startsWith("/usr/")) args.push("--ro-bind", program, program);
  const env = { ...baseEnv(SANDBOX_HOME), ...server.env };
  args.push(...jailEnd(baseDir, env, [...inner, program, ...server.args]));
  // The filter is read once, when bwrap starts: its file goes as soon as the server is up.
  const dir = await Deno.makeTempDir({ prefix: "mcp-jail-" });
  if (wrap.seccomp !== undefined) {
    await Deno.writeFile(`${dir}/${SECCOMP_FILE}`, wrap.seccomp, { mode: 0o600 });
  }
  const argv = launchArgv(wrap, args, `${dir}/${SECCOMP_FILE}`);
  const spec = {
    command: argv[0],
    args: argv.slice(1),
    env: { PATH: "/usr/bin:/bin" },
    killGroup: false,
    startMarker: true,
  };
  return { spec, cleanup: () => Deno.remove(dir, { recursive: true }).catch(() => {}) };
}

/**
 * The server's program: a path (relative to `baseDir`) or a name found on PATH. A UserError naming the
 * server when there is none, so a typo is one line before anything starts.
 */
export async function resolveCommand(server: McpServerConfig, baseDir: string): Promise<string> {
  const command = server.command ?? "";
  const found = command.includes("/")
    ? await executableAt(isAbsolute(command) ? command : resolve(baseDir, command))
    : await findExecutable(command);
  if (found === undefined) {
    throw new UserError(`mcp server ${JSON.stringify(server.name)}: command`, {
      value: command,
      why: command.includes("/") ? "no executable file there" : "no such program on PATH",
      fix: "install it or give its path (e.g. command: node, args: [node_modules/PKG/dist/index.js])",
    });
  }
  return found;
}

/**
 * The declared paths as bwrap binds, read-only first, parents before children. Each must exist (a
 * UserError naming the server and the path). The host side is the real path (symlinks resolved); the
 * jail side is the path as written, made absolute, so the server's arguments name them as they are.
 */
export async function declaredBinds(server: McpServerConfig, baseDir: string): Promise<string[]> {
  const binds: Array<{ flag: string; source: string; target: string }> = [];
  for (const [flag, paths] of [["--ro-bind", server.read_only], ["--bind", server.read_write]] as const) {
    for (const path of paths) {
      const target = resolve(baseDir, path);
      let source: string;
      try {
        source = await Deno.realPath(target);
      } catch {
        throw new UserError(`mcp server ${JSON.stringify(server.name)}: ${flagKey(flag)}`, {
          value: path,
          why: "no such file or directory",
          fix: "fix the path (relative to the working directory) or create it",
        });
      }
      binds.push({ flag, source, target });
    }
  }
  binds.sort((a, b) => a.target.split("/").length - b.target.split("/").length);
  return binds.flatMap((b) => [b.flag, b.source, b.target]);
}

function flagKey(flag: "--ro-bind" | "--bind"): string {
  return flag === "--bind" ? "read_write" : "read_only";
}

/**
 * A program outside /usr is bound into the jail at its path; as root (the jail runs as nobody) one that
 * other users cannot reach is run from a copy in the binary cache.
 */
async function reachableProgram(command: string, wrap: BwrapWrapper, cacheDir: string): Promise<string> {
  const real = await Deno.realPath(command);
  if (real.startsWith("/usr/")) return command;
  if (wrap.setpriv !== undefined && !await reachableByAnyone(real)) return await cachedBinary(real, cacheDir);
  return real;
}

async function executableAt(path: string): Promise<string | undefined> {
  try {
    const info = await Deno.stat(path);
    return info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0 ? path : undefined;
  } catch {
    return undefined;
  }
}

/** What a server run as you gets from your environment: where programs are, your home, the locale. */
function hostEnv(): Record<string, string> {
  const env: Record<string, string> = { LANG: "C.UTF-8" };
  for (const key of ["PATH", "HOME", "LANG"]) {
    const value = Deno.env.get(key);
    if (value !== undefined) env[key] = value;
  }
  return env;
}
