/**
 * The command lines of the sandbox: which interpreter runs each language, and the bubblewrap argument
 * list that builds the jail around it (see docs/sandbox.md for what each mount and flag is for).
 *
 * @module
 */

import type { Language, SandboxLimits } from "./sandbox_types.ts";

/** Where the program lives inside the jail: its working directory and HOME (a fresh tmpfs). */
export const SANDBOX_HOME = "/home/sandbox";

/** Printed on stderr by the jail's shell before the program starts: bwrap itself got that far. */
export const START_MARKER = "\u0001sandbox-started\n";

/** How one language is run. */
export interface Interpreter {
  /** Name of the program file in the scratch directory. */
  file: string;
  /** The command line, given the program file's path. */
  argv(file: string): string[];
  /** Which rlimit bounds memory: V8 (Node, Deno) reserves far more address space than it uses, so `data`. */
  memoryLimit: "as" | "data";
  /** Added to the memory limit: what the runtime maps before the program runs. */
  memoryOverheadBytes: number;
  /** Environment variables beyond PATH, LANG and HOME. */
  env(home: string): Record<string, string>;
  /** A host binary outside /usr to bind read-only at the same path inside the jail. */
  bindBinary?: string;
}

/** First match of `name` in fixed system directories, then on PATH. */
export async function findExecutable(name: string): Promise<string | undefined> {
  const path = Deno.env.get("PATH") ?? "";
  const dirs = ["/usr/bin", "/usr/sbin", "/bin", "/sbin", "/usr/local/bin", ...path.split(":")];
  for (const dir of dirs.filter((d) => d.startsWith("/"))) {
    if (await isExecutableFile(`${dir}/${name}`)) return `${dir}/${name}`;
  }
  return undefined;
}

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    const info = await Deno.stat(path);
    return info.isFile && ((info.mode ?? 0o111) & 0o111) !== 0;
  } catch {
    return false;
  }
}

/**
 * Python: Debian's python3 under /usr (the jail binds /usr only, so a pyenv or conda python in $HOME is
 * not used). JavaScript: node under /usr if present, else the Deno running this process, with no
 * permissions and no remote or npm imports. `reachable` maps a binary outside /usr to a path the
 * sandbox user can bind and run (sandbox_binary.ts; the identity when that user is us).
 */
export async function resolveInterpreters(
  javascript: "auto" | "deno",
  reachable: (binary: string) => Promise<string> = (binary) => Promise.resolve(binary),
): Promise<Map<Language, Interpreter>> {
  const found = new Map<Language, Interpreter>();
  for (const python of ["/usr/bin/python3", "/usr/local/bin/python3"]) {
    if (await isExecutableFile(python)) {
      found.set("python", {
        file: "main.py",
        argv: (file) => [python, "-B", file],
        memoryLimit: "as",
        memoryOverheadBytes: 0,
        env: () => ({ PYTHONDONTWRITEBYTECODE: "1" }),
      });
      break;
    }
  }
  found.set("javascript", await javascriptInterpreter(javascript, reachable));
  return found;
}

async function javascriptInterpreter(
  javascript: "auto" | "deno",
  reachable: (binary: string) => Promise<string>,
): Promise<Interpreter> {
  for (const node of ["/usr/bin/node", "/usr/local/bin/node"]) {
    if (javascript === "auto" && await isExecutableFile(node)) {
      const argv = (file: string) => [node, file];
      return { file: "main.js", argv, memoryLimit: "data", memoryOverheadBytes: 0, env: () => ({}) };
    }
  }
  const running = await Deno.realPath(Deno.execPath());
  const deno = running.startsWith("/usr/") ? running : await reachable(running);
  const flags = ["run", "--no-remote", "--no-npm", "--no-config", "--no-lock", "--no-prompt", "--quiet"];
  return {
    file: "main.js",
    argv: (file) => [deno, ...flags, file],
    memoryLimit: "data",
    // Deno's V8 maps a writable code range of about 512 MiB at start-up (measured: it will not start
    // with RLIMIT_DATA below ~600 MiB), so the program's own limit comes on top of it.
    memoryOverheadBytes: 512 * 1024 ** 2,
    env: (home) => ({ DENO_DIR: `${home}/.deno`, DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" }),
    bindBinary: deno.startsWith("/usr/") ? undefined : deno,
  };
}

/** The whitelisted environment every program gets. */
export function baseEnv(home: string): Record<string, string> {
  return { PATH: "/usr/local/bin:/usr/bin:/bin", LANG: "C.UTF-8", HOME: home };
}

export interface BwrapOptions {
  /** Host directory holding the program files (bound read-only one by one). */
  hostDir: string;
  names: string[];
  interpreter: Interpreter;
  limits: SandboxLimits;
  /** The command run in the jail (prlimit ... -- interpreter ...). */
  inner: string[];
  /** A descriptor bwrap inherits holding the seccomp filter (sandbox_seccomp.ts), if any. */
  seccompFd?: number;
}

/** The bubblewrap arguments: namespaces, read-only system dirs, fresh tmpfs mounts, a clean env. */
export function bwrapCommand(o: BwrapOptions): string[] {
  const args = jailArgs(o.limits.maxFileBytes);
  if (o.seccompFd !== undefined) args.push("--seccomp", String(o.seccompFd));
  for (const name of o.names) args.push("--ro-bind", `${o.hostDir}/${name}`, `${SANDBOX_HOME}/${name}`);
  const binary = o.interpreter.bindBinary;
  if (binary !== undefined) args.push("--ro-bind", binary, binary);
  const env = { ...baseEnv(SANDBOX_HOME), ...o.interpreter.env(SANDBOX_HOME) };
  return [...args, ...jailEnd(SANDBOX_HOME, env, o.inner)];
}

/**
 * The jail every sandboxed process starts from: every namespace (network included) new, no new user
 * namespaces inside, killed with its parent, a new session; read-only `/usr` and system links, `/proc`,
 * a minimal `/dev`, and fresh `/tmp`, `/dev/shm` and home (`SANDBOX_HOME`) tmpfs mounts of `tmpfsBytes`
 * each. Binds of the run's own files follow it.
 */
export function jailArgs(tmpfsBytes: number): string[] {
  const size = String(tmpfsBytes);
  return [
    ...["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"],
    ...["--hostname", "sandbox", "--ro-bind", "/usr", "/usr"],
    ...systemDirs(),
    ...["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"],
    ...["--ro-bind-try", "/etc/alternatives", "/etc/alternatives"],
    ...["--proc", "/proc", "--dev", "/dev"],
    ...["--size", size, "--tmpfs", "/tmp", "--size", size, "--tmpfs", "/dev/shm"],
    ...["--size", size, "--tmpfs", SANDBOX_HOME],
  ];
}

/**
 * The end of a jail's command line, after its binds: the root and `/dev` made read-only, the working
 * directory, a cleared environment holding only `env`, and the shell that prints the start marker and
 * then becomes `inner`.
 */
export function jailEnd(cwd: string, env: Record<string, string>, inner: string[]): string[] {
  // bwrap's root and its /dev are unsized tmpfs mounts owned by the sandbox user: once every mount point
  // exists, both become read-only, so the sized mounts and the read-write binds are all it can write.
  const args = ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", cwd, "--clearenv"];
  for (const [key, value] of Object.entries(env)) args.push("--setenv", key, value);
  // The shell prints the start marker, then becomes the program: no marker means bwrap failed.
  const marker = START_MARKER.replace("\u0001", "\\001").replace("\n", "\\n");
  args.push("--", "/bin/sh", "-c", `printf '${marker}' >&2 && exec "$@"`, "sh", ...inner);
  return args;
}

/** /bin, /lib... as on the host: symlinks into /usr on merged-/usr systems, else read-only binds. */
function systemDirs(): string[] {
  const args: string[] = [];
  for (const name of ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]) {
    const path = `/${name}`;
    let info: Deno.FileInfo;
    try {
      info = Deno.lstatSync(path);
    } catch {
      continue;
    }
    if (info.isSymlink) args.push("--symlink", Deno.readLinkSync(path), path);
    else if (info.isDirectory) args.push("--ro-bind", path, path);
  }
  return args;
}
