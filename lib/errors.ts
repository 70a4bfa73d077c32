/**
 * One error style for the whole toolkit: what failed, the value, why, and how to fix it, on one line.
 *
 * `UserError` is for bad input (a file, a flag, a config value) — a CLI prints its message and exits 2.
 * `InfrastructureError` is a fault of the machine (a sandbox or an MCP server that cannot start or dies):
 * a CLI prints its one line and exits 1. Anything else is a bug and keeps its stack trace.
 */
export interface ErrorParts {
  /** The offending value, shown with JSON quoting when it is a string. */
  value?: unknown;
  /** Why it is wrong. */
  why: string;
  /** What the user should do. */
  fix: string;
}

export class UserError extends Error {
  readonly what: string;
  readonly parts: ErrorParts;

  constructor(what: string, parts: ErrorParts) {
    super(formatMessage(what, parts));
    this.name = "UserError";
    this.what = what;
    this.parts = parts;
  }
}

/**
 * A fault of the machine, not of the model's call: a sandbox that cannot start, an interpreter that is
 * missing, an MCP server that died. A tool throws it (or a subclass, such as the sandbox's own error) to
 * stop the stage; any other error a tool throws becomes a `tool_error` result the model sees. Never
 * scored as a model failure.
 */
export class InfrastructureError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "InfrastructureError";
  }
}

/** Formats `what: got VALUE; why. Fix: fix` as a single line. */
export function formatMessage(what: string, parts: ErrorParts): string {
  const got = "value" in parts ? ` (got ${showValue(parts.value)})` : "";
  return oneLine(`${what}${got}: ${parts.why}. Fix: ${parts.fix}`);
}

/** A short, single-line rendering of any value for error messages. */
export function showValue(value: unknown): string {
  let text: string;
  try {
    // JSON writes NaN and ±Infinity as null: a number is shown as itself.
    text = typeof value === "string"
      ? JSON.stringify(value)
      : typeof value === "number"
      ? String(value)
      : String(JSON.stringify(value) ?? value);
  } catch {
    text = String(value);
  }
  return text.length > 120 ? `${text.slice(0, 117)}...` : text;
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ");
}
