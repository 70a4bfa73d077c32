/**
 * The part of the rollout's sandbox (lib/tools/sandbox.ts) the code_exec reward uses, and how the
 * score stage opens it. Kept in one file so the rewards depend on one narrow seam.
 *
 * @module
 */

export type { RunRequest, RunResult, Sandbox, SandboxKind } from "../tools/sandbox.ts";
export type { SandboxSession, SessionEnd, SessionRequest } from "../tools/sandbox_session.ts";
export { openSandbox, SandboxUnavailableError } from "../tools/sandbox.ts";
