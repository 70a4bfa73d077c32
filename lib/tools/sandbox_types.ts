/**
 * The words the sandbox's files share: which jail, which language, the limits of a run, and what a
 * run asks and returns. In a file of their own so that the sandbox (`sandbox.ts`) and the pieces it
 * is built from (`sandbox_command.ts`, `sandbox_process.ts`, `sandbox_session.ts`) all import them
 * from below instead of from each other.
 *
 * @module
 */

/** The jail: bubblewrap, or none (only with the explicit unsafe switch). */
export type SandboxKind = "bwrap" | "none";

/** The languages a program may be written in. */
export type Language = "python" | "javascript";

/** The limits of one run. */
export interface SandboxLimits {
  /** Wall-clock limit of one run, sandbox start-up included. */
  timeoutMs: number;
  /** Address-space (Python) or data-segment (Node, Deno: V8 reserves address space) limit of the program. */
  memoryBytes: number;
  /** Bytes kept of stdout and of stderr each; more stops the program (`output_truncated`). */
  maxOutputBytes: number;
  /** Largest file the program may write; also the size of each of its tmpfs mounts. */
  maxFileBytes: number;
  /** Processes and threads inside one run (bwrap only). */
  maxProcesses: number;
}

/** One program to run. */
export interface RunRequest {
  language: Language;
  code: string;
  stdin?: string;
  limits?: Partial<SandboxLimits>;
  signal?: AbortSignal;
  /** Extra read-only files beside the program, relative path → content (e.g. a test harness). */
  files?: Record<string, string>;
}

/** What a run did. */
export interface RunResult {
  /** ok: exit 0; error: non-zero exit; timeout / oom / output_truncated as named. */
  status: "ok" | "error" | "timeout" | "oom" | "output_truncated";
  exitCode: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}
