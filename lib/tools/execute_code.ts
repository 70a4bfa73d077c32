/**
 * The `execute_code` tool: runs a Python or JavaScript program in the sandbox and shows the model its
 * output. The sandbox is opened (and checked) when the tools are loaded, so a machine without
 * bubblewrap fails before the first episode, not in the middle of one; sandbox `none` is refused there
 * unless `rollout.tools.unsafe_no_sandbox` is true.
 *
 * What the model sees: stdout as is; stderr after it under a `stderr:` label when non-empty; then a
 * bracketed line for anything but a clean exit (exit code, timeout, memory, output cut).
 *
 * @module
 */

import type { Sandbox } from "./sandbox.ts";
import type { Language, RunResult, SandboxLimits } from "./sandbox_types.ts";
import type { ToolCallStatus, ToolContext, ToolResult } from "./types.ts";
import type { Tool } from "./types.ts";

const STATUS: Record<RunResult["status"], ToolCallStatus> = {
  ok: "ok",
  error: "tool_error",
  timeout: "timeout",
  oom: "oom",
  output_truncated: "output_truncated",
};

/** The tool over an opened sandbox; `limits` add to the sandbox's own (the call's timeout wins). */
export function executeCodeTool(sandbox: Sandbox, limits: Partial<SandboxLimits> = {}): Tool {
  return {
    name: "execute_code",
    description: "Run a short Python 3 or JavaScript program and return what it prints. " +
      "No network, no files outside its working directory, limited time and memory.",
    parameters: {
      type: "object",
      properties: {
        language: { type: "string", enum: ["python", "javascript"], description: "the program's language" },
        code: { type: "string", description: "the program; print what you want to see" },
      },
      required: ["language", "code"],
      additionalProperties: false,
    },
    async run(args, ctx): Promise<ToolResult> {
      const result = await sandbox.run({
        language: args.language as Language,
        code: String(args.code),
        signal: ctx.signal,
        limits: { ...limits, ...callLimits(ctx) },
      });
      return { status: STATUS[result.status], output: describeRun(result, ctx.timeoutMs) };
    },
  };
}

/** The call's time budget, and no more output than the model will be shown (4 bytes per char at most). */
function callLimits(ctx: ToolContext): Partial<SandboxLimits> {
  const limits: Partial<SandboxLimits> = {};
  if (Number.isFinite(ctx.timeoutMs) && ctx.timeoutMs > 0) limits.timeoutMs = ctx.timeoutMs;
  if (Number.isFinite(ctx.maxOutputChars) && ctx.maxOutputChars > 0) {
    limits.maxOutputBytes = Math.max(256, ctx.maxOutputChars * 4);
  }
  return limits;
}

/** Output text for the model: stdout, labelled stderr, and a bracketed note unless it exited cleanly. */
export function describeRun(result: RunResult, timeoutMs: number): string {
  const parts: string[] = [];
  if (result.stdout !== "") parts.push(result.stdout.replace(/\n$/, ""));
  if (result.stderr !== "") parts.push(`stderr:\n${result.stderr.replace(/\n$/, "")}`);
  const note = {
    ok: undefined,
    error: `[exit code ${result.exitCode}]`,
    timeout: `[stopped: time limit of ${timeoutMs / 1000} s reached]`,
    oom: "[stopped: memory limit reached]",
    output_truncated: "[stopped: output limit reached]",
  }[result.status];
  if (note !== undefined) parts.push(note);
  return parts.length === 0 ? "(no output)" : parts.join("\n");
}
