/**
 * Errors across the Worker boundary: a `UserError` stays a `UserError` (one-line CLI message, exit 2),
 * an AbortError (a cancelled turn, abort.ts) an AbortError; anything else keeps its class name, message
 * and the worker-side stack.
 *
 * @module
 */

import { type ErrorParts, UserError } from "../errors.ts";

/** An error as posted by the worker. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  user?: { what: string; parts: ErrorParts };
}

export function serializeError(error: unknown): SerializedError {
  if (error instanceof UserError) {
    return { name: error.name, message: error.message, user: { what: error.what, parts: error.parts } };
  }
  const e = error instanceof Error ? error : new Error(String(error));
  return { name: e.name, message: e.message, stack: e.stack };
}

export function deserializeError(s: SerializedError): Error {
  if (s.user) return new UserError(s.user.what, s.user.parts);
  if (s.name === "AbortError") return new DOMException(s.message, "AbortError"); // a cancelled turn
  const Kind = s.name === "RangeError" ? RangeError : s.name === "TypeError" ? TypeError : Error;
  const error = new Kind(s.message);
  if (s.stack) {
    error.stack = `${s.name}: ${s.message}\n    (in the policy worker)\n${
      s.stack.split("\n").slice(1).join("\n")
    }`;
  }
  return error;
}
