/**
 * What a tool is, to the rollout: a name, a JSON schema for its arguments, and an async function.
 * Built-in tools (calculator, execute_code, read_file) and user tools (a module named in config) all
 * have this shape. A tool returns a result instead of throwing for anything the model did wrong; it
 * throws only for infrastructure faults (a sandbox that cannot start), which stop the stage.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { EpisodeScope } from "./episode_scope.ts";

/** Status of one tool call, as stored in `tool_calls[].status` of rollouts.arrow. */
export const TOOL_CALL_STATUSES = [
  "ok",
  "invalid_tool_call",
  "unknown_tool",
  "invalid_arguments",
  "tool_error",
  "timeout",
  "oom",
  "output_truncated",
  "tool_budget_exceeded",
  "sandbox_error",
] as const;
export type ToolCallStatus = typeof TOOL_CALL_STATUSES[number];

/** A JSON schema (the subset lib/tools/schema.ts validates). */
export type JsonSchema = Record<string, unknown>;

/** What a tool's function returns: the text the model sees, and how the call went. */
export interface ToolResult {
  status: ToolCallStatus;
  /** The tool response shown to the model (an error message when status is not ok). */
  output: string;
}

/** Per-call context the rollout gives a tool. */
export interface ToolContext {
  /** The task of the episode (read_file's per-task jail comes from it). */
  task: Task;
  /** Aborted when the call's time is up; long-running tools must stop on it. */
  signal: AbortSignal;
  /** Wall-clock budget of the call, in milliseconds. */
  timeoutMs: number;
  /** Output longer than this many characters is cut and marked (`output_truncated`). */
  maxOutputChars: number;
  /**
   * What the tool keeps for this episode (an MCP server started per episode), closed when the episode
   * ends. The rollout always gives one; absent only where a tool is called by hand.
   */
  episode?: EpisodeScope;
}

/** One tool. `run` gets arguments already validated against `parameters`. */
export interface Tool {
  name: string;
  description: string;
  /** JSON schema of the arguments object. */
  parameters: JsonSchema;
  /** Returns a plain string (status ok) or a full result. */
  run(args: Record<string, unknown>, ctx: ToolContext): Promise<string | ToolResult>;
  /**
   * Checks the arguments instead of the rollout's own JSON-schema subset (lib/tools/schema.ts): one
   * message per failure, empty when they conform. MCP tools use it for their servers' full JSON Schemas.
   */
  validate?(args: Record<string, unknown>): string[];
  /** Called when an episode starts, so that per-episode state can start before the first call needs it. */
  startEpisode?(episode: EpisodeScope): void;
}

/** Re-exported: tools throw it for faults of the machine (defined beside UserError). */
export { InfrastructureError } from "../errors.ts";
