/**
 * The code sandbox: runs a Python or JavaScript program written by the model (execute_code) or checks a
 * solution against its tests (the code_exec reward), under bubblewrap, with time, memory, process,
 * output and file-size limits. What it covers and what it does not: docs/sandbox.md.
 *
 * A run returns a result for anything the program does (exit, crash, loop, flood, allocate); it throws
 * `SandboxUnavailableError` only when the sandbox itself cannot start, an infrastructure fault that
 * must stop the stage rather than score the model 0.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { SandboxUnavailableError } from "./sandbox_error.ts";
import { baseEnv, bwrapCommand, type Interpreter, resolveInterpreters } from "./sandbox_command.ts";
import { type ProcessSpec, runProcess } from "./sandbox_process.ts";
import { cachedBinary, DEFAULT_BINARY_CACHE, reachableByAnyone } from "./sandbox_binary.ts";
import {
  type BwrapWrapper,
  bwrapWrapper,
  launchArgv,
  requireExecutable,
  SECCOMP_FILE,
  seccompFd,
} from "./sandbox_launch.ts";
import { type SandboxSession, type SessionRequest, startSession } from "./sandbox_session.ts";
import type { Language, RunRequest, RunResult, SandboxKind, SandboxLimits } from "./sandbox_types.ts";

export { SandboxUnavailableError };
export type { Language, RunRequest, RunResult, SandboxKind, SandboxLimits } from "./sandbox_types.ts";

export const DEFAULT_LIMITS: SandboxLimits = {
  timeoutMs: 10_000,
  memoryBytes: 1024 ** 3,
  maxOutputBytes: 64 * 1024,
  maxFileBytes: 16 * 1024 ** 2,
  maxProcesses: 64,
};

export interface Sandbox {
  readonly kind: SandboxKind;
  run(req: RunRequest): Promise<RunResult>;
  /**
   * Starts one process per request, each in its own jail, and hands their sessions to `body`; kills
   * them and removes their files when `body` settles. The group counts as one run of `maxConcurrency`.
   */
  withSessions<T>(reqs: SessionRequest[], body: (sessions: SandboxSession[]) => Promise<T>): Promise<T>;
}

export interface OpenSandboxOptions {
  kind: SandboxKind;
  unsafeNoSandbox: boolean;
  limits?: Partial<SandboxLimits>;
  /** Runs at once at most; more wait their turn (default 4). */
  maxConcurrency?: number;
  /** JavaScript runtime: node under /usr when present (auto), or the running Deno. */
  javascript?: "auto" | "deno";
  /** Where the per-run host directories go (default: the system temp dir). */
  tempDir?: string;
  /**
   * Where a copy of the running Deno goes when the sandbox user cannot reach it (as root, for Deno
   * under a private home); default /var/cache/deno-rl. See sandbox_binary.ts.
   */
  binaryCacheDir?: string;
}

/** Checks that the sandbox works (bwrap present and able to start; a tiny probe run) before any work. */
export async function openSandbox(o: OpenSandboxOptions): Promise<Sandbox> {
  if (o.kind === "none" && !o.unsafeNoSandbox) {
    throw new UserError("sandbox none", {
      value: o.kind,
      why: "running model-written code without a sandbox runs it with your permissions",
      fix: "install bubblewrap and use sandbox bwrap, or set rollout.tools.unsafe_no_sandbox to true",
    });
  }
  const prlimit = await requireExecutable("prlimit", "util-linux");
  const wrap = o.kind === "bwrap"
    ? await bwrapWrapper()
    : { setsid: await requireExecutable("setsid", "util-linux") };
  // As root the jail runs as nobody, who may not reach the running Deno (e.g. under /root/.npm).
  const cacheDir = o.binaryCacheDir ?? DEFAULT_BINARY_CACHE;
  const reachable = async (binary: string) =>
    "setpriv" in wrap && wrap.setpriv !== undefined && !await reachableByAnyone(binary)
      ? await cachedBinary(binary, cacheDir)
      : binary;
  const interpreters = await resolveInterpreters(o.javascript ?? "auto", reachable);
  const sandbox = new ProcessSandbox(o.kind, interpreters, prlimit, wrap, o);
  await probe(sandbox, interpreters);
  return sandbox;
}

/** What starts a run: setsid (sandbox none); bwrap, behind setpriv when we are root (docs/sandbox.md). */
type Wrapper = { setsid: string } | BwrapWrapper;

/**
 * A tiny program in each language must run and print. bwrap failing to start throws from runProcess
 * with bwrap's own reason; getting here means the jail came up and the interpreter did not run.
 */
async function probe(sandbox: Sandbox, interpreters: Map<Language, Interpreter>): Promise<void> {
  for (const [language, interpreter] of interpreters) {
    const code = language === "python" ? 'print("probe")' : 'console.log("probe")';
    const result = await sandbox.run({ language, code, limits: { timeoutMs: 30_000 } });
    if (result.status !== "ok" || result.stdout !== "probe\n") {
      const binary = interpreter.argv(interpreter.file)[0];
      throw new SandboxUnavailableError(`sandbox ${sandbox.kind}: ${language} on ${binary}`, {
        value: `${result.status}: ${result.stderr.trim().slice(0, 300)}`,
        why: "a probe program did not run inside the sandbox, though the sandbox itself started",
        fix: `check that ${binary} runs, and that every user can read it; see docs/sandbox.md`,
      });
    }
  }
}

class ProcessSandbox implements Sandbox {
  readonly #slots: Slots;

  constructor(
    readonly kind: SandboxKind,
    private readonly interpreters: Map<Language, Interpreter>,
    private readonly prlimit: string,
    private readonly wrap: Wrapper,
    private readonly options: OpenSandboxOptions,
  ) {
    this.#slots = new Slots(options.maxConcurrency ?? 4);
  }

  async run(req: RunRequest): Promise<RunResult> {
    const limits = { ...DEFAULT_LIMITS, ...this.options.limits, ...req.limits };
    const interpreter = this.#interpreter(req.language);
    return await this.#slots.run(async () => {
      const { dir, names } = await this.#writeJail(req, interpreter);
      try {
        const spec = this.#spec(interpreter, dir, names, limits);
        return await runProcess(spec, req.stdin ?? "", limits, req.signal);
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    });
  }

  async withSessions<T>(
    reqs: SessionRequest[],
    body: (sessions: SandboxSession[]) => Promise<T>,
  ): Promise<T> {
    const interpreters = reqs.map((req) => this.#interpreter(req.language));
    return await this.#slots.run(async () => {
      const dirs: string[] = [];
      const sessions: SandboxSession[] = [];
      try {
        for (const [i, req] of reqs.entries()) {
          const limits = { ...DEFAULT_LIMITS, ...this.options.limits, ...req.limits };
          const { dir, names } = await this.#writeJail(req, interpreters[i]);
          dirs.push(dir);
          sessions.push(startSession(this.#spec(interpreters[i], dir, names, limits), limits));
        }
        return await body(sessions);
      } finally {
        await Promise.all(sessions.map((session) => session.close().catch(() => {})));
        for (const dir of dirs) await Deno.remove(dir, { recursive: true });
      }
    });
  }

  /** The run's host directory: the program's files, and the seccomp filter bwrap reads (when any). */
  async #writeJail(
    req: Pick<RunRequest, "code" | "files">,
    interpreter: Interpreter,
  ): Promise<{ dir: string; names: string[] }> {
    const written = await writeProgram(req, interpreter, this.options.tempDir);
    const seccomp = "bwrap" in this.wrap ? this.wrap.seccomp : undefined;
    if (seccomp !== undefined) {
      await Deno.writeFile(`${written.dir}/${SECCOMP_FILE}`, seccomp, { mode: 0o600 });
    }
    return written;
  }

  #interpreter(language: Language): Interpreter {
    const interpreter = this.interpreters.get(language);
    if (interpreter === undefined) {
      throw new SandboxUnavailableError(`sandbox: ${language}`, {
        why: "no interpreter for this language was found (python3 under /usr)",
        fix: "install python3 (Debian: apt-get install python3)",
      });
    }
    return interpreter;
  }

  #spec(interpreter: Interpreter, dir: string, names: string[], limits: SandboxLimits): ProcessSpec {
    const rlimits = [
      `--${interpreter.memoryLimit}=${limits.memoryBytes + interpreter.memoryOverheadBytes}`,
      `--fsize=${limits.maxFileBytes}`,
      "--core=0",
    ];
    if ("setsid" in this.wrap) {
      // Sandbox none: limits and a process group, nothing else (it runs as you; see docs/sandbox.md).
      const argv = [this.prlimit, ...rlimits, "--", ...interpreter.argv(`${dir}/${interpreter.file}`)];
      const env = { ...baseEnv(dir), ...interpreter.env(dir) };
      return { command: this.wrap.setsid, args: argv, cwd: dir, env, killGroup: true };
    }
    rlimits.push(`--nproc=${limits.maxProcesses}`);
    const inner = [this.prlimit, ...rlimits, "--", ...interpreter.argv(interpreter.file)];
    const fd = seccompFd(this.wrap);
    const args = bwrapCommand({ hostDir: dir, names, interpreter, limits, inner, seccompFd: fd });
    const argv = launchArgv(this.wrap, args, `${dir}/${SECCOMP_FILE}`);
    return { command: argv[0], args: argv.slice(1), killGroup: false, startMarker: true };
  }
}

/** A fresh host directory holding the program and its extra files, readable by the sandbox user. */
async function writeProgram(
  req: Pick<RunRequest, "code" | "files">,
  interpreter: Interpreter,
  tempDir: string | undefined,
): Promise<{ dir: string; names: string[] }> {
  const dir = await Deno.makeTempDir({ prefix: "sandbox-", dir: tempDir });
  await Deno.chmod(dir, 0o755);
  const files = { ...req.files, [interpreter.file]: req.code };
  for (const [name, content] of Object.entries(files)) {
    if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]*$/.test(name)) {
      await Deno.remove(dir, { recursive: true });
      throw new RangeError(`sandbox: file name ${JSON.stringify(name)} must be a plain name`);
    }
    await Deno.writeTextFile(`${dir}/${name}`, content, { mode: 0o644 });
  }
  return { dir, names: Object.keys(files) };
}

/** At most `limit` runs at once; the others wait in order. */
class Slots {
  #free: number;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`sandbox: maxConcurrency ${limit}`);
    this.#free = limit;
  }

  async run<T>(body: () => Promise<T>): Promise<T> {
    if (this.#free > 0) this.#free--;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      return await body();
    } finally {
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#free++;
    }
  }
}
