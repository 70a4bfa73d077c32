/**
 * A sandboxed process the host talks to while it runs, line by line on its stdin and stdout, instead
 * of feeding it all its input at once (`runProcess`). The code_exec reward uses two of them, one for
 * the solution and one for the tests, and relays messages between them (lib/score/code_exec.ts).
 *
 * The same bounds as a run hold: a SIGKILL at the deadline (`timeout`), stderr kept up to the cap, and
 * a stdout line longer than the cap kills the process (`output_truncated`), so a program that writes
 * without a newline costs neither memory nor time. Everything the program writes on stdout reaches the
 * host only as whole lines in order; what it does with its other descriptors does not reach it.
 *
 * @module
 */

import type { Language, RunResult, SandboxLimits } from "./sandbox_types.ts";
import {
  Capture,
  classify,
  PIPE_GRACE_MS,
  type ProcessSpec,
  spawnProcess,
  stripMarker,
} from "./sandbox_process.ts";

/** One program of a session group (`Sandbox.withSessions`). */
export interface SessionRequest {
  language: Language;
  code: string;
  /** Extra read-only files beside the program, relative path → content. */
  files?: Record<string, string>;
  limits?: Partial<SandboxLimits>;
}

/** How a session's process ended: `closed` when the host killed it before it exited on its own. */
export interface SessionEnd {
  status: RunResult["status"] | "closed";
  exitCode: number | null;
  stderr: string;
  ms: number;
}

export interface SandboxSession {
  /**
   * The next line the program wrote on stdout, without its newline; undefined once stdout is closed,
   * the program is gone (a partial last line is dropped) or being killed (deadline, output cap, close),
   * or when the line passes the output cap.
   */
  readLine(): Promise<Uint8Array | undefined>;
  /** Writes one line (a newline is added); false when the program no longer reads its stdin. */
  writeLine(line: Uint8Array | string): Promise<boolean>;
  /** Waits until the process ends (at the latest at its deadline) and says how. */
  wait(): Promise<SessionEnd>;
  /** Kills the process unless it has already ended, and says how it ended. */
  close(): Promise<SessionEnd>;
}

type KillReason = "timeout" | "output_truncated" | "closed";

const NEWLINE = 0x0a;

/** Starts `spec` and returns its session; the deadline counts from now. */
export function startSession(spec: ProcessSpec, limits: SandboxLimits): SandboxSession {
  return new ProcessSession(spec, limits);
}

class ProcessSession implements SandboxSession {
  readonly #child: Deno.ChildProcess;
  readonly #start = performance.now();
  readonly #timer: ReturnType<typeof setTimeout>;
  readonly #stdin: WritableStreamDefaultWriter<Uint8Array>;
  readonly #stdout: LineReader;
  readonly #stderr: Capture;
  readonly #exited: Promise<Deno.CommandStatus>;
  #reason: KillReason | undefined;
  #done = false;
  #end: Promise<SessionEnd> | undefined;

  constructor(private readonly spec: ProcessSpec, limits: SandboxLimits) {
    this.#child = spawnProcess(spec);
    this.#exited = this.#child.status.finally(() => this.#done = true);
    this.#timer = setTimeout(() => this.#kill("timeout"), limits.timeoutMs);
    this.#stdin = this.#child.stdin.getWriter();
    const onFlood = () => this.#kill("output_truncated");
    this.#stdout = new LineReader(this.#child.stdout, limits.maxOutputBytes, onFlood);
    this.#stderr = new Capture(this.#child.stderr, limits.maxOutputBytes, onFlood);
  }

  #kill(why: KillReason): void {
    if (this.#done) return;
    this.#reason ??= why;
    try {
      if (this.spec.killGroup) Deno.kill(-this.#child.pid, "SIGKILL");
      else this.#child.kill("SIGKILL");
    } catch { /* already gone */ }
  }

  async readLine(): Promise<Uint8Array | undefined> {
    const line = await this.#stdout.next();
    // Once we decided to kill it, nothing more it says counts: a reply can race the SIGKILL (a flood
    // of stderr closes that pipe first, and the program could answer its EPIPE before it dies).
    return this.#reason === undefined ? line : undefined;
  }

  async writeLine(line: Uint8Array | string): Promise<boolean> {
    const bytes = typeof line === "string" ? new TextEncoder().encode(line) : line;
    const framed = new Uint8Array(bytes.length + 1);
    framed.set(bytes);
    framed[bytes.length] = NEWLINE;
    try {
      await this.#stdin.write(framed);
      return true;
    } catch {
      return false; // the program exited or closed its stdin
    }
  }

  wait(): Promise<SessionEnd> {
    this.#end ??= this.#finish();
    return this.#end;
  }

  close(): Promise<SessionEnd> {
    this.#kill("closed");
    return this.wait();
  }

  async #finish(): Promise<SessionEnd> {
    const status = await this.#exited;
    clearTimeout(this.#timer);
    await this.#stdin.close().catch(() => {});
    await this.#stdout.cancel();
    await this.#stderr.finish(PIPE_GRACE_MS);
    const reason = this.#reason;
    const runReason = reason === "closed" ? "timeout" : reason; // killed by us: no start marker needed
    const stderr = this.spec.startMarker
      ? stripMarker(this.#stderr.text(), status.code, runReason)
      : this.#stderr.text();
    return {
      status: reason === "closed" ? "closed" : classify(reason, status.code, stderr),
      exitCode: reason === undefined ? status.code : null,
      stderr,
      ms: Math.round(performance.now() - this.#start),
    };
  }
}

/** Splits a pipe into lines; a line longer than `cap` bytes calls `onFlood` and ends the stream. */
class LineReader {
  readonly #reader: ReadableStreamDefaultReader<Uint8Array>;
  #pending: Uint8Array = new Uint8Array(0);
  #ended = false;

  constructor(stream: ReadableStream<Uint8Array>, readonly cap: number, readonly onFlood: () => void) {
    this.#reader = stream.getReader();
  }

  async next(): Promise<Uint8Array | undefined> {
    let scanned = 0;
    while (true) {
      const newline = this.#pending.indexOf(NEWLINE, scanned);
      if (newline >= 0) {
        const line = this.#pending.slice(0, newline);
        this.#pending = this.#pending.subarray(newline + 1);
        return line;
      }
      scanned = this.#pending.length;
      if (this.#pending.length > this.cap) {
        this.#ended = true;
        this.onFlood();
      }
      if (this.#ended) return undefined;
      const chunk = await this.#read();
      if (chunk === undefined) this.#ended = true;
      else this.#pending = concat(this.#pending, chunk);
    }
  }

  async #read(): Promise<Uint8Array | undefined> {
    try {
      const { done, value } = await this.#reader.read();
      return done ? undefined : value;
    } catch {
      return undefined; // cancelled, or the pipe broke when the process was killed
    }
  }

  async cancel(): Promise<void> {
    this.#ended = true;
    await this.#reader.cancel().catch(() => {});
  }
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
