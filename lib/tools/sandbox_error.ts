/**
 * The sandbox's own infrastructure error, in a module of its own so that the sandbox's helper modules
 * (sandbox_process.ts, sandbox_binary.ts) throw it without importing sandbox.ts, which imports them.
 *
 * @module
 */

import { type ErrorParts, formatMessage } from "../errors.ts";
import { InfrastructureError } from "./types.ts";

/**
 * Infrastructure fault: bubblewrap (or prlimit, or an interpreter) missing or unable to start.
 * An InfrastructureError, not a UserError: it stops the stage instead of scoring the model.
 * (Sandbox `none` without `unsafeNoSandbox` is the user's config and throws a UserError instead.)
 */
export class SandboxUnavailableError extends InfrastructureError {
  constructor(what: string, parts: ErrorParts) {
    super(formatMessage(what, parts));
    this.name = "SandboxUnavailableError";
  }
}
