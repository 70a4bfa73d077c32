/**
 * Runs one assistant turn's parsed tool calls and records each one (`tool_calls` of rollouts.arrow).
 *
 * Per call, in this order: over the budget (per turn, then per episode) → `tool_budget_exceeded`;
 * unparseable → `invalid_tool_call`; unknown name → `unknown_tool`; arguments failing the tool's
 * schema → `invalid_arguments`. None of these runs anything, and the model gets a short message saying
 * what was wrong and how to call correctly. Otherwise the tool runs under the shared limiter with an
 * AbortSignal that fires at `timeoutMs`; if it has not settled `TIMEOUT_GRACE_MS` later the call is
 * recorded as `timeout` and abandoned, so a tool that ignores its signal never hangs the episode (its
 * limiter slot is freed then too). A tool that throws gets `tool_error` with its message, except an
 * `InfrastructureError`, which is re-thrown after the turn's other calls settle and stops the stage.
 * Output is cut to `maxOutputChars` with a marker (`output_truncated`) and sanitized (sanitize.ts).
 *
 * Calls of one turn run concurrently; the limiter bounds all calls in flight across episodes. Each call
 * gets the episode's scope (`episode`: what a tool keeps per episode); without one, the turn gets its own,
 * closed when the turn's calls settle.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { EpisodeStatus } from "../arrow/kinds.ts";
import { EpisodeScope } from "../tools/episode_scope.ts";
import { describeArguments, validateArguments } from "../tools/schema.ts";
import { InfrastructureError, TOOL_CALL_STATUSES } from "../tools/types.ts";
import type { Tool, ToolCallStatus, ToolContext, ToolResult } from "../tools/types.ts";
import type { Limiter } from "./limiter.ts";
import { sanitizeText, truncateText } from "./sanitize.ts";
import type { ParsedToolCall } from "./tool_calls.ts";

/** One row of `tool_calls`. */
export interface ToolCallRecord {
  turn: number;
  /** The tool name ("" when the call could not be parsed). */
  name: string;
  /** The arguments JSON as the model wrote it (the whole block for an unparseable call), sanitized. */
  arguments: string;
  status: ToolCallStatus;
  /** What the model sees as the tool response. */
  output: string;
  /** Wall time of the tool's run in milliseconds (0 for calls that ran nothing). */
  ms: number;
}

export interface DispatchOptions {
  task: Task;
  /** Index of the assistant turn (1-based, as the rollout's `turn_idx`), copied into each record. */
  turn: number;
  maxCallsPerTurn: number;
  /** Calls the episode may still run (its budget). */
  callsLeft: number;
  timeoutMs: number;
  maxOutputChars: number;
  limiter: Limiter;
  /** The episode's scope (default: one for this turn alone, closed when its calls settle). */
  episode?: EpisodeScope;
}

/** How long past its timeout a tool may take to settle before the call is abandoned. */
export const TIMEOUT_GRACE_MS = 250;
/** `arguments` of an unparseable call keep at most this many characters of its block. */
const MAX_STORED_RAW_CHARS = 4096;

/** One record per call, in order. Throws only an `InfrastructureError` from a tool. */
export async function runToolCalls(
  calls: readonly ParsedToolCall[],
  tools: ReadonlyMap<string, Tool>,
  options: DispatchOptions,
): Promise<ToolCallRecord[]> {
  const allowed = Math.max(0, Math.min(options.maxCallsPerTurn, options.callsLeft));
  const turnScope = options.episode === undefined ? new EpisodeScope() : undefined;
  const o = turnScope === undefined ? options : { ...options, episode: turnScope };
  const settled = await Promise.allSettled(
    calls.map((call, index) =>
      index < allowed ? runOne(call, tools, o) : Promise.resolve(overBudget(call, index, o))
    ),
  );
  await turnScope?.close();
  const failed = settled.find((result) => result.status === "rejected");
  if (failed !== undefined) throw (failed as PromiseRejectedResult).reason;
  return settled.map((result) => (result as PromiseFulfilledResult<ToolCallRecord>).value);
}

/** How many of a turn's records count against the episode's budget (those that were not refused). */
export function callsUsed(records: readonly ToolCallRecord[]): number {
  return records.filter((record) => record.status !== "tool_budget_exceeded").length;
}

function record(
  call: ParsedToolCall,
  options: DispatchOptions,
  status: ToolCallStatus,
  output: string,
  ms = 0,
): ToolCallRecord {
  const args = call.ok ? call.argumentsText : truncateText(call.raw, MAX_STORED_RAW_CHARS).text;
  return {
    turn: options.turn,
    name: sanitizeText(call.ok ? call.name : ""),
    arguments: sanitizeText(args),
    status,
    output: sanitizeText(output),
    ms,
  };
}

function overBudget(call: ParsedToolCall, index: number, options: DispatchOptions): ToolCallRecord {
  const why = index >= options.maxCallsPerTurn
    ? `at most ${options.maxCallsPerTurn} tool calls run per turn and this was call ${index + 1}`
    : "the episode's tool-call budget is used up";
  return record(call, options, "tool_budget_exceeded", `Error: not run: ${why}. Make fewer calls.`);
}

async function runOne(
  call: ParsedToolCall,
  tools: ReadonlyMap<string, Tool>,
  options: DispatchOptions,
): Promise<ToolCallRecord> {
  if (!call.ok) {
    const how = 'Write one JSON object {"name": <tool name>, "arguments": {...}} between the tool call tags.';
    return record(call, options, "invalid_tool_call", `Error: invalid tool call: ${call.error}. ${how}`);
  }
  const tool = tools.get(call.name);
  if (tool === undefined) {
    const names = [...tools.keys()].join(", ") || "none";
    const output = `Error: unknown tool ${JSON.stringify(call.name)}. Available tools: ${names}.`;
    return record(call, options, "unknown_tool", output);
  }
  const errors = tool.validate?.(call.arguments) ?? validateArguments(tool.parameters, call.arguments);
  if (errors.length > 0) {
    const output = `Error: invalid arguments for ${tool.name}: ${errors.join("; ")}. ` +
      `Expected arguments: ${describeArguments(tool.parameters)}.`;
    return record(call, options, "invalid_arguments", output);
  }
  const { result, ms } = await options.limiter.run(async () => {
    const started = performance.now(); // after the limiter: `ms` is the tool's time, not the queue's
    const result = await runWithTimeout(tool, call.arguments, options);
    return { result, ms: Math.round((performance.now() - started) * 1000) / 1000 };
  });
  const cut = truncateText(result.output, options.maxOutputChars);
  const status = cut.truncated && result.status === "ok" ? "output_truncated" : result.status;
  return record(call, options, status, cut.text, ms);
}

type Outcome = { kind: "value"; value: unknown } | { kind: "error"; error: unknown } | { kind: "late" };

/** The tool's result, or a timeout / tool_error result. Re-throws an InfrastructureError. */
async function runWithTimeout(
  tool: Tool,
  args: Record<string, unknown>,
  options: DispatchOptions,
): Promise<ToolResult> {
  const controller = new AbortController();
  const ctx: ToolContext = {
    task: options.task,
    signal: controller.signal,
    timeoutMs: options.timeoutMs,
    maxOutputChars: options.maxOutputChars,
    episode: options.episode,
  };
  const abortTimer = setTimeout(
    () => controller.abort(new DOMException(`${tool.name} timed out`, "TimeoutError")),
    options.timeoutMs,
  );
  let lateTimer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<Outcome>((resolve) => {
    lateTimer = setTimeout(() => resolve({ kind: "late" }), options.timeoutMs + TIMEOUT_GRACE_MS);
  });
  // `then` catches a synchronous throw in `run` too; the handlers also keep a rejection that arrives
  // after the call was abandoned from surfacing as unhandled.
  const settled = Promise.resolve().then(() => tool.run(args, ctx)).then(
    (value): Outcome => ({ kind: "value", value }),
    (error): Outcome => ({ kind: "error", error }),
  );
  const outcome = await Promise.race([settled, late]);
  clearTimeout(abortTimer);
  clearTimeout(lateTimer);
  const seconds = options.timeoutMs / 1000;
  const timedOut = `Error: ${tool.name} did not finish within ${seconds} s and was stopped.`;
  if (outcome.kind === "late") return { status: "timeout", output: timedOut };
  if (outcome.kind === "value") return normalizeResult(tool, outcome.value);
  if (outcome.error instanceof InfrastructureError) throw outcome.error;
  // A tool that stopped on its signal usually rejects with the abort reason: that is a timeout.
  if (controller.signal.aborted) return { status: "timeout", output: timedOut };
  const message = outcome.error instanceof Error ? outcome.error.message : String(outcome.error);
  return { status: "tool_error", output: `Error: ${tool.name} failed: ${message}` };
}

/** A tool's return value as a result; a malformed one is the tool's bug, shown as `tool_error`. */
function normalizeResult(tool: Tool, value: unknown): ToolResult {
  if (typeof value === "string") return { status: "ok", output: value };
  const result = value as Partial<ToolResult> | null;
  if (
    result !== null && typeof result === "object" && typeof result.output === "string" &&
    (TOOL_CALL_STATUSES as readonly unknown[]).includes(result.status)
  ) {
    return { status: result.status!, output: result.output };
  }
  return {
    status: "tool_error",
    output: `Error: ${tool.name} returned neither a string nor {status, output}; this is a bug in the tool.`,
  };
}

/**
 * Severity of each call status for `episodeStatus`, worst first. `unknown_tool` and
 * `invalid_arguments` count as `invalid_tool_call` at the episode level (the model called wrongly).
 */
const SEVERITY: readonly EpisodeStatus[] = [
  "sandbox_error",
  "oom",
  "timeout",
  "tool_error",
  "invalid_tool_call",
  "tool_budget_exceeded",
  "output_truncated",
  "ok",
];

function episodeLevel(status: ToolCallStatus): EpisodeStatus {
  return status === "unknown_tool" || status === "invalid_arguments" ? "invalid_tool_call" : status;
}

/**
 * The episode's status: the most severe of its calls' statuses (order in `SEVERITY`), with
 * `finish_reason` `tool_budget` counting as `tool_budget_exceeded`; `ok` when nothing went wrong.
 */
export function episodeStatus(records: readonly ToolCallRecord[], finishReason: string): EpisodeStatus {
  const seen = new Set<EpisodeStatus>(records.map((r) => episodeLevel(r.status)));
  if (finishReason === "tool_budget") seen.add("tool_budget_exceeded");
  return SEVERITY.find((status) => seen.has(status)) ?? "ok";
}
