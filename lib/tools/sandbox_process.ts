/**
 * Runs one sandboxed process and turns whatever it does into a `RunResult`: output read incrementally
 * and cut at the cap (the process is killed there, so a flood costs neither memory nor time), a
 * SIGKILL at the deadline or on abort, invalid UTF-8 decoded with replacement characters, and a status
 * from the exit (ok, error, oom) or from why we killed it (timeout, output_truncated).
 *
 * @module
 */

import type { RunResult, SandboxLimits } from "./sandbox_types.ts";
import { SandboxUnavailableError } from "./sandbox_error.ts";
import { START_MARKER } from "./sandbox_command.ts";

export interface ProcessSpec {
  command: string;
  args: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Kill the whole process group (sandbox none) rather than the one process (bwrap's pid namespace). */
  killGroup: boolean;
  /** stderr starts with START_MARKER when the jail came up (bwrap). */
  startMarker?: boolean;
}

/** How an interpreter says it ran out of memory (Python, V8 in Node and Deno, C++ and libc). */
const OOM_PATTERN = new RegExp(
  [
    "MemoryError",
    "out of memory",
    "Fatal process OOM",
    "Array buffer allocation failed",
    "Cannot allocate memory",
    "std::bad_alloc",
  ].join("|"),
  "i",
);

/** After the process exits, how long a leftover holder of its pipes may keep them open. */
export const PIPE_GRACE_MS = 200;

type KillReason = "timeout" | "output_truncated";

export async function runProcess(
  spec: ProcessSpec,
  stdin: string,
  limits: SandboxLimits,
  signal?: AbortSignal,
): Promise<RunResult> {
  const start = performance.now();
  const child = spawnProcess(spec);
  let reason: KillReason | undefined;
  const kill = (why: KillReason) => {
    reason ??= why;
    try {
      if (spec.killGroup) Deno.kill(-child.pid, "SIGKILL");
      else child.kill("SIGKILL");
    } catch { /* already gone */ }
  };
  const timer = setTimeout(() => kill("timeout"), limits.timeoutMs);
  const onAbort = () => kill("timeout");
  if (signal?.aborted) onAbort();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    void feed(child.stdin, stdin);
    const onFlood = () => kill("output_truncated");
    const stdout = new Capture(child.stdout, limits.maxOutputBytes, onFlood);
    const stderr = new Capture(child.stderr, limits.maxOutputBytes, onFlood);
    const status = await child.status;
    await Promise.all([stdout.finish(PIPE_GRACE_MS), stderr.finish(PIPE_GRACE_MS)]);
    const err = spec.startMarker ? stripMarker(stderr.text(), status.code, reason) : stderr.text();
    return {
      status: classify(reason, status.code, err),
      exitCode: reason === undefined ? status.code : null,
      stdout: stdout.text(),
      stderr: err,
      ms: Math.round(performance.now() - start),
    };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
  }
}

export function classify(reason: KillReason | undefined, code: number, stderr: string): RunResult["status"] {
  if (reason !== undefined) return reason;
  if (code === 0) return "ok";
  return OOM_PATTERN.test(stderr) ? "oom" : "error";
}

/** No marker: bwrap failed before the program could start, an infrastructure fault. */
export function stripMarker(stderr: string, code: number, reason?: KillReason): string {
  if (stderr.startsWith(START_MARKER)) return stderr.slice(START_MARKER.length);
  if (reason !== undefined) return stderr; // killed (deadline, abort) before the jail was up
  throw new SandboxUnavailableError("sandbox: bubblewrap", {
    value: `exit ${code}: ${stderr.trim().slice(0, 300)}`,
    ...bwrapFailure(stderr),
  });
}

/** Why bwrap did not start the program, told from its own message where it names the cause. */
function bwrapFailure(stderr: string): { why: string; fix: string } {
  const source = /Can't find source path (.*): (Permission denied|No such file or directory)/.exec(stderr);
  if (source !== null && source[2] === "Permission denied") {
    return {
      why: `bubblewrap could not start the program: the sandbox user cannot read ${source[1]} (a directory ` +
        "on its way is closed to other users)",
      fix: `let every user read it (chmod o+r on the file, o+x on each directory above it) or move it; ` +
        "see docs/sandbox.md",
    };
  }
  if (source !== null) {
    return {
      why: `bubblewrap could not start the program: ${source[1]} does not exist`,
      fix: "check that the file named exists (a temp directory removed during the run?); see docs/sandbox.md",
    };
  }
  if (/namespace|uid map|Operation not permitted/i.test(stderr)) {
    return {
      why: "bubblewrap could not start the program: it may not create the namespaces of the jail here",
      fix:
        "check that unprivileged user namespaces are enabled (sysctl kernel.unprivileged_userns_clone=1; " +
        "on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0); see docs/sandbox.md",
    };
  }
  return {
    why: "bubblewrap could not start the program (its own message, above, says why)",
    fix: "see docs/sandbox.md for what the sandbox needs",
  };
}

async function feed(stream: WritableStream<Uint8Array>, text: string): Promise<void> {
  const writer = stream.getWriter();
  try {
    if (text.length > 0) await writer.write(new TextEncoder().encode(text));
    await writer.close();
  } catch {
    // The program exited or closed stdin without reading it all: not our error.
  }
}

/** Reads a pipe chunk by chunk, keeping at most `cap` bytes; at the cap it calls `onFlood` and stops. */
export class Capture {
  readonly #chunks: Uint8Array[] = [];
  #kept = 0;
  #truncated = false;
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  readonly #done: Promise<void>;

  constructor(stream: ReadableStream<Uint8Array>, readonly cap: number, onFlood: () => void) {
    this.#reader = stream.getReader();
    this.#done = this.#pump(onFlood);
  }

  async #pump(onFlood: () => void): Promise<void> {
    try {
      while (true) {
        const { done, value } = await this.#reader.read();
        if (done) return;
        const room = this.cap - this.#kept;
        this.#chunks.push(value.length <= room ? value : value.subarray(0, room));
        this.#kept += Math.min(value.length, room);
        if (value.length > room) {
          this.#truncated = true;
          onFlood();
          await this.#reader.cancel();
          return;
        }
      }
    } catch {
      // Cancelled by finish(), or the pipe broke when the process was killed.
    }
  }

  /** Waits for EOF, but no longer than `graceMs`: a stray process could hold the pipe open. */
  async finish(graceMs: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), graceMs));
    const outcome = await Promise.race([this.#done, late]);
    clearTimeout(timer);
    if (outcome === "late") await this.#reader.cancel().catch(() => {});
  }

  /** The kept bytes as text (invalid UTF-8 becomes U+FFFD), with a marker when cut. */
  text(): string {
    const bytes = new Uint8Array(this.#kept);
    let offset = 0;
    for (const chunk of this.#chunks) {
      bytes.set(chunk, offset);
      offset += chunk.length;
    }
    const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
    return this.#truncated ? `${text}\n[output truncated at ${this.cap} bytes]` : text;
  }
}

/** Starts `spec` with a cleared environment (only `spec.env`) and all three streams piped. */
export function spawnProcess(spec: ProcessSpec): Deno.ChildProcess {
  return new Deno.Command(spec.command, {
    args: spec.args,
    cwd: spec.cwd,
    clearEnv: true,
    env: spec.env ?? {},
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
}
