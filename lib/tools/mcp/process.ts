/**
 * A stdio MCP server's process: started with a clean environment, its stdout read as lines (one JSON-RPC
 * message each, as MCP's stdio transport frames them), the tail of its stderr kept for messages, and
 * killed — with its whole process group when it runs outside a jail — when we are done with it.
 *
 * Under bubblewrap the jail's shell prints the sandbox's start marker on stderr before the server starts
 * (lib/tools/sandbox_command.ts); a process that ends without it never got past bwrap, which
 * `startFailure` turns into the sandbox's own diagnosis.
 *
 * @module
 */

import { START_MARKER } from "../sandbox_command.ts";
import { stripMarker } from "../sandbox_process.ts";

export interface ServerProcessSpec {
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string>;
  /** Kill the process group (sandbox none, started by setsid) rather than the one process (bwrap). */
  killGroup: boolean;
  /** stderr starts with the sandbox's start marker when the jail came up (bwrap). */
  startMarker: boolean;
}

/** A stdout line longer than this is not a message we will hold: the server is stopped. */
export const MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
/** How much of the end of stderr is kept for messages. */
const STDERR_KEPT = 16 * 1024;

export class ServerProcess {
  readonly pid: number;
  /** Settles when the process has exited (never rejects). */
  readonly exited: Promise<Deno.CommandStatus>;
  /** Why we stopped reading it, when it was our doing (a message over the limit). */
  overflow = false;
  /** A write failed: nothing reads its stdin any more (it exited, or closed it). */
  stdinBroken = false;
  readonly #child: Deno.ChildProcess;
  readonly #spec: ServerProcessSpec;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  #stderr = "";
  #markerSeen = false;

  constructor(spec: ServerProcessSpec) {
    this.#spec = spec;
    this.#child = new Deno.Command(spec.command, {
      args: spec.args,
      cwd: spec.cwd,
      clearEnv: true,
      env: spec.env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.pid = this.#child.pid;
    this.#writer = this.#child.stdin.getWriter();
    this.#writer.closed.catch(() => {}); // a write after exit is reported by `write`, not as unhandled
    this.exited = this.#child.status;
    void this.#readStderr();
  }

  /** Writes one line to the server's stdin; rejects when the server is gone or no longer reads it. */
  async write(line: string): Promise<void> {
    try {
      await this.#writer.write(new TextEncoder().encode(line));
    } catch (error) {
      this.stdinBroken = true;
      throw error;
    }
  }

  /** Calls `onLine` with each stdout line (without its newline), until stdout ends. */
  async readLines(onLine: (line: string) => void): Promise<void> {
    const decoder = new TextDecoder("utf-8", { fatal: false });
    let pending: Uint8Array[] = [];
    let pendingBytes = 0;
    try {
      for await (const chunk of this.#child.stdout) {
        let start = 0;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, start)) {
          pending.push(chunk.subarray(start, i));
          onLine(decoder.decode(concat(pending)));
          [pending, pendingBytes, start] = [[], 0, i + 1];
        }
        if (start < chunk.length) {
          pending.push(chunk.slice(start));
          pendingBytes += chunk.length - start;
          if (pendingBytes > MAX_MESSAGE_BYTES) {
            this.overflow = true;
            this.kill();
            return;
          }
        }
      }
    } catch {
      // The pipe broke when the process was killed: the end of its output.
    }
  }

  /** The end of what the server wrote on stderr (the sandbox's start marker removed). */
  stderrText(): string {
    return this.#stderr;
  }

  /**
   * After the process ended before it was ready: the sandbox's own error when bwrap never started the
   * server (SandboxUnavailableError, naming an unreadable or missing path), else nothing.
   */
  startFailure(status: Deno.CommandStatus): void {
    if (this.#spec.startMarker && !this.#markerSeen) stripMarker(this.#stderr, status.code);
  }

  /** SIGKILL: the jail (its pid namespace takes every process in it) or the process group. */
  kill(): void {
    try {
      if (this.#spec.killGroup) Deno.kill(-this.pid, "SIGKILL");
      else this.#child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }

  /** Closes stdin (a polite server exits), waits up to `graceMs`, then kills; resolves when it has exited. */
  async stop(graceMs: number): Promise<void> {
    await this.#writer.close().catch(() => {});
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => timer = setTimeout(() => resolve("late"), graceMs));
    const outcome = await Promise.race([this.exited, late]);
    clearTimeout(timer);
    if (outcome === "late" || this.#spec.killGroup) this.kill(); // the group may outlive its leader
    await this.exited;
  }

  async #readStderr(): Promise<void> {
    const decoder = new TextDecoder("utf-8", { fatal: false });
    try {
      for await (const chunk of this.#child.stderr) {
        this.#stderr += decoder.decode(chunk, { stream: true });
        if (this.#spec.startMarker && !this.#markerSeen && this.#stderr.startsWith(START_MARKER)) {
          this.#markerSeen = true;
          this.#stderr = this.#stderr.slice(START_MARKER.length);
        }
        if (this.#stderr.length > 2 * STDERR_KEPT) this.#stderr = this.#stderr.slice(-STDERR_KEPT);
      }
    } catch {
      // Killed.
    }
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0];
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let offset = 0;
  for (const part of parts) {
    out.set(part, offset);
    offset += part.length;
  }
  return out;
}
