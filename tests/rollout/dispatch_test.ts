/**
 * Running a turn's tool calls with fake tools (no model): statuses and messages for bad calls, the
 * per-turn and episode budgets, timeouts on a tool that ignores its signal, errors, infrastructure
 * faults, output caps, sanitized storage, and the concurrency bound.
 */
import assert from "node:assert/strict";
import { tableFromArrays, tableFromIPC, tableToIPC } from "apache-arrow";
import type { Task } from "../../lib/data/task.ts";
import {
  callsUsed,
  type DispatchOptions,
  episodeStatus,
  runToolCalls,
  TIMEOUT_GRACE_MS,
  type ToolCallRecord,
} from "../../lib/rollout/dispatch.ts";
import { Limiter } from "../../lib/rollout/limiter.ts";
import { parseToolCalls } from "../../lib/rollout/tool_calls.ts";
import { InfrastructureError, type Tool, type ToolResult } from "../../lib/tools/types.ts";

const TASK: Task = { id: "t0", source: "generic", prompt: "q" };
const TEXT_ARG = { type: "object", properties: { text: { type: "string" } }, required: ["text"] };

function fakeTool(name: string, run: Tool["run"], parameters: Record<string, unknown> = TEXT_ARG): Tool {
  return { name, description: `fake ${name}`, parameters, run };
}

/** Echoes its text and counts its runs. */
function echoTool(): Tool & { runs: number } {
  const tool = fakeTool("echo", (args) => {
    tool.runs++;
    return Promise.resolve(String(args.text));
  }) as Tool & { runs: number };
  tool.runs = 0;
  return tool;
}

function toolMap(...tools: Tool[]): Map<string, Tool> {
  return new Map(tools.map((tool) => [tool.name, tool]));
}

function options(overrides: Partial<DispatchOptions> = {}): DispatchOptions {
  return {
    task: TASK,
    turn: 2,
    maxCallsPerTurn: 8,
    callsLeft: 100,
    timeoutMs: 1000,
    maxOutputChars: 200,
    limiter: new Limiter(4),
    ...overrides,
  };
}

function calls(...json: string[]) {
  return parseToolCalls(json.map((j) => `<tool_call>\n${j}\n</tool_call>`).join("\n"));
}

const echoCall = (text: string) => JSON.stringify({ name: "echo", arguments: { text } });

Deno.test("runToolCalls() runs a good call and records it as the model wrote it, with its duration", async () => {
  const slow = fakeTool("echo", async (args) => {
    await new Promise((r) => setTimeout(r, 40)); // the call takes at least 40 ms
    return String(args.text);
  });
  const [record] = await runToolCalls(
    calls('{"name": "echo", "arguments": {"text":"hi"}}'),
    toolMap(slow),
    options(),
  );
  assert.equal(record.turn, 2);
  assert.equal(record.name, "echo");
  assert.equal(record.arguments, '{"text":"hi"}');
  assert.equal(record.status, "ok");
  assert.equal(record.output, "hi");
  assert.ok(record.ms >= 39, `the record's duration covers the call: ${record.ms} ms`);
});

// docs/RELIABILITY.md item 14: nothing runs, and the model is told what was wrong and how to call.
Deno.test("an unparseable call runs nothing and the model gets the reason and the format", async () => {
  const echo = echoTool();
  const parsed = parseToolCalls('<tool_call>\n{"name": "echo", "arguments": {"text": "h');
  const [record] = await runToolCalls(parsed, toolMap(echo), options());
  assert.equal(echo.runs, 0);
  assert.equal(record.status, "invalid_tool_call");
  assert.equal(record.name, "");
  assert.ok(record.arguments.startsWith("<tool_call>"));
  assert.match(record.output, /^Error: invalid tool call: the JSON object is not complete/);
  assert.match(record.output, /"name": <tool name>, "arguments"/);
});

// docs/RELIABILITY.md item 16
Deno.test("an unknown tool and wrong argument types get their own statuses and messages", async () => {
  const echo = echoTool();
  const records = await runToolCalls(
    calls('{"name": "calc", "arguments": {}}', '{"name": "echo", "arguments": {"text": 5}}'),
    toolMap(echo),
    options(),
  );
  assert.equal(echo.runs, 0);
  assert.deepEqual(records.map((r) => r.status), ["unknown_tool", "invalid_arguments"]);
  assert.equal(records[0].output, 'Error: unknown tool "calc". Available tools: echo.');
  assert.equal(
    records[1].output,
    'Error: invalid arguments for echo: arguments.text: expected string, got integer 5. Expected arguments: {"text": string}.',
  );
});

// docs/RELIABILITY.md item 19
Deno.test("100 calls in a turn: only maxCallsPerTurn run, the rest are tool_budget_exceeded", async () => {
  const echo = echoTool();
  const many = calls(...Array.from({ length: 100 }, (_, i) => echoCall(`c${i}`)));
  const records = await runToolCalls(many, toolMap(echo), options({ maxCallsPerTurn: 4 }));
  assert.equal(records.length, 100);
  assert.equal(echo.runs, 4);
  assert.deepEqual(records.slice(0, 4).map((r) => r.output), ["c0", "c1", "c2", "c3"]);
  assert.ok(records.slice(4).every((r) => r.status === "tool_budget_exceeded" && r.ms === 0));
  assert.match(records[4].output, /at most 4 tool calls run per turn and this was call 5/);
  assert.equal(callsUsed(records), 4);
});

Deno.test("the episode budget caps a turn below maxCallsPerTurn", async () => {
  const echo = echoTool();
  const records = await runToolCalls(
    calls(echoCall("a"), echoCall("b"), echoCall("c")),
    toolMap(echo),
    options({ callsLeft: 1 }),
  );
  assert.equal(echo.runs, 1);
  assert.deepEqual(records.map((r) => r.status), ["ok", "tool_budget_exceeded", "tool_budget_exceeded"]);
  assert.match(records[1].output, /budget is used up/);
  const none = await runToolCalls(calls(echoCall("a")), toolMap(echo), options({ callsLeft: 0 }));
  assert.equal(none[0].status, "tool_budget_exceeded");
  assert.equal(echo.runs, 1);
});

Deno.test("a tool that ignores its signal is recorded as timeout without waiting for it", async () => {
  let seenSignal: AbortSignal | undefined;
  let finished: Promise<void> | undefined;
  const sleeper = fakeTool("sleep", (_args, ctx) => {
    seenSignal = ctx.signal;
    finished = new Promise((resolve) => setTimeout(resolve, 600));
    return finished.then(() => "woke up");
  });
  const started = performance.now();
  const [record] = await runToolCalls(
    calls('{"name": "sleep", "arguments": {"text": ""}}'),
    toolMap(sleeper),
    options({ timeoutMs: 100 }),
  );
  const elapsed = performance.now() - started;
  assert.equal(record.status, "timeout");
  assert.equal(record.output, "Error: sleep did not finish within 0.1 s and was stopped.");
  assert.ok(seenSignal?.aborted, "the signal fired at the timeout");
  assert.ok(elapsed < 100 + TIMEOUT_GRACE_MS + 400, `returned after ${elapsed} ms`);
  await finished; // let the abandoned sleeper end inside this test
});

Deno.test("a tool that stops on its signal by rejecting is a timeout, not a tool_error", async () => {
  const polite = fakeTool("polite", (_args, ctx) =>
    new Promise((_resolve, reject) => {
      ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason));
    }));
  const [record] = await runToolCalls(
    calls('{"name": "polite", "arguments": {"text": ""}}'),
    toolMap(polite),
    options({ timeoutMs: 30 }),
  );
  assert.equal(record.status, "timeout");
});

Deno.test("a tool that throws gets tool_error with its message; a malformed result is a tool_error", async () => {
  const thrower = fakeTool("boom", () => {
    throw new Error("division by zero");
  });
  const bad = fakeTool("bad", () => Promise.resolve({ status: "fine", output: 1 } as unknown as ToolResult));
  const records = await runToolCalls(
    calls('{"name": "boom", "arguments": {"text": ""}}', '{"name": "bad", "arguments": {"text": ""}}'),
    toolMap(thrower, bad),
    options(),
  );
  assert.equal(records[0].status, "tool_error");
  assert.equal(records[0].output, "Error: boom failed: division by zero");
  assert.equal(records[1].status, "tool_error");
  assert.match(records[1].output, /bug in the tool/);
});

Deno.test("an InfrastructureError is re-thrown after the turn's other calls settle", async () => {
  const echo = echoTool();
  const broken = fakeTool("sandboxed", () => Promise.reject(new InfrastructureError("bwrap: cannot start")));
  await assert.rejects(
    runToolCalls(
      calls('{"name": "sandboxed", "arguments": {"text": ""}}', echoCall("x")),
      toolMap(broken, echo),
      options(),
    ),
    (error) => error instanceof InfrastructureError && error.message === "bwrap: cannot start",
  );
  assert.equal(echo.runs, 1);
});

Deno.test("output past maxOutputChars is cut with a marker and output_truncated", async () => {
  const huge = fakeTool("huge", () => Promise.resolve("y".repeat(5_000_000)));
  const [record] = await runToolCalls(
    calls('{"name": "huge", "arguments": {"text": ""}}'),
    toolMap(huge),
    options(),
  );
  assert.equal(record.status, "output_truncated");
  assert.ok(
    record.output.startsWith("y".repeat(200) + "\n[output truncated: 200 of 5000000 characters shown]"),
  );
  assert.ok(record.output.length < 260);
  // A tool's own error status is kept when its output is cut.
  const loud = fakeTool(
    "loud",
    () => Promise.resolve({ status: "tool_error" as const, output: "e".repeat(500) }),
  );
  const [error] = await runToolCalls(
    calls('{"name": "loud", "arguments": {"text": ""}}'),
    toolMap(loud),
    options(),
  );
  assert.equal(error.status, "tool_error");
});

// docs/RELIABILITY.md item 18: what is stored and shown is valid UTF-8 that round-trips through Arrow
// byte for byte.
Deno.test("records are sanitized and round-trip through an Arrow utf8 column byte-stable", async () => {
  const dirty = fakeTool("dirty", () => Promise.resolve("a\ud800b\u0000c\u202ed\ud83d\ude00"));
  const records = await runToolCalls(
    parseToolCalls(
      '<tool_call>\n{"name": "dirty", "arguments": {"text": ""}}\n</tool_call><tool_call>\n{"name": "x\ud800"}\n</tool_call>',
    ),
    toolMap(dirty),
    options(),
  );
  assert.equal(records[0].output, "a\uFFFDb\uFFFDc\uFFFDd😀");
  assert.equal(records[1].status, "invalid_tool_call");
  assert.ok(records[1].arguments.includes('"x\uFFFD"'), "the stored block is sanitized too");
  const strings = records.flatMap((r) => [r.name, r.arguments, r.output]);
  const table = tableFromIPC(tableToIPC(tableFromArrays({ s: strings })));
  const back = table.getChild("s")!.toArray() as string[];
  assert.deepEqual([...back], strings);
  const encoder = new TextEncoder();
  for (let i = 0; i < strings.length; i++) {
    assert.deepEqual(encoder.encode(back[i]), encoder.encode(strings[i]));
    assert.equal(new TextDecoder("utf-8", { fatal: true }).decode(encoder.encode(strings[i])), strings[i]);
  }
});

// docs/RELIABILITY.md item 11
Deno.test("20 concurrent calls run under the limiter's bound and all finish", async () => {
  const limiter = new Limiter(3);
  let active = 0;
  let peak = 0;
  const counter = fakeTool("count", async () => {
    active++;
    peak = Math.max(peak, active);
    await new Promise((resolve) => setTimeout(resolve, 10));
    active--;
    return "done";
  });
  const turns = Array.from({ length: 4 }, (_, turn) =>
    runToolCalls(
      calls(...Array.from({ length: 5 }, () => '{"name": "count", "arguments": {"text": ""}}')),
      toolMap(counter),
      options({ turn, limiter }),
    ));
  const records: ToolCallRecord[] = (await Promise.all(turns)).flat();
  assert.equal(records.length, 20);
  assert.ok(records.every((r) => r.status === "ok"));
  assert.equal(peak, 3, "the bound is reached and never passed");
  assert.equal(limiter.active, 0);
});

Deno.test("episodeStatus() takes the most severe call status and maps call-only statuses", () => {
  const rec = (status: ToolCallRecord["status"]): ToolCallRecord => ({
    turn: 0,
    name: "t",
    arguments: "{}",
    status,
    output: "",
    ms: 0,
  });
  assert.equal(episodeStatus([], "stop"), "ok");
  assert.equal(episodeStatus([rec("ok"), rec("output_truncated")], "stop"), "output_truncated");
  assert.equal(episodeStatus([rec("unknown_tool")], "stop"), "invalid_tool_call");
  assert.equal(episodeStatus([rec("invalid_arguments"), rec("ok")], "stop"), "invalid_tool_call");
  assert.equal(episodeStatus([rec("ok")], "tool_budget"), "tool_budget_exceeded");
  assert.equal(episodeStatus([rec("tool_error"), rec("timeout")], "stop"), "timeout");
  assert.equal(episodeStatus([rec("timeout"), rec("sandbox_error")], "length"), "sandbox_error");
});
