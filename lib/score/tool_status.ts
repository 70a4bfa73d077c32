/**
 * How tool-call statuses (lib/tools/types.ts) count for rewards and for MT-GRPO.
 *
 * - A call *ran* when the environment executed it and appended its result: `ok`, `tool_error`,
 *   `timeout`, `oom`, `output_truncated`. These are verl-tool's "valid actions", whose observation
 *   carries a result; the first of them is MT-GRPO's "first tool result".
 * - A call *succeeded* when its status is `ok`.
 * - Everything else (`invalid_tool_call`, `unknown_tool`, `invalid_arguments`,
 *   `tool_budget_exceeded`, `sandbox_error`) did not run.
 *
 * @module
 */

const RAN = new Set(["ok", "tool_error", "timeout", "oom", "output_truncated"]);

/** Whether a call with this status was executed and produced a tool result. */
export function toolRan(status: string): boolean {
  return RAN.has(status);
}

/** Whether a call with this status succeeded. */
export function toolSucceeded(status: string): boolean {
  return status === "ok";
}
