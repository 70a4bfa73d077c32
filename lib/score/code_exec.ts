/**
 * `code_exec` (MBPP): 1 when the model's final code block passes every test of the task, else 0. The
 * solution and the tests run in two separate sandboxed processes (code_harness.ts); this file relays
 * their messages and takes the verdict from the tests' process only.
 *
 * The solution is the last fenced code block (```python … ``` or ``` … ```; an unclosed fence runs to
 * the end) of the final assistant message's visible text. Setup = the task's `test_imports` lines,
 * then its `setup_code`; tests = `task.tests`.
 *
 * Statuses: `passed`; model failures (value 0): `no_code`, `solution_error` (the solution raised
 * while loading, its process exited non-zero, or it answered with something that is not plain data),
 * `failed` (an assert failed), `test_error` (another exception in the tests, a solution's exception
 * included), `no_sentinel` (the solution's process exited 0 before the tests finished: an early
 * exit), `error` (the tests' process ended without a verdict), `timeout` (one deadline for the
 * whole scoring), `oom`, `output_truncated` (a line or stderr past the output cap). A task without
 * tests is bad data (UserError); a sandbox that cannot run throws and stops the stage.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { visibleText } from "./answer.ts";
import { SERVER_PY, SOLUTION_FILE, TESTER_PY, TESTS_FILE, verdictOf } from "./code_harness.ts";
import type { SandboxSession, SessionEnd, SessionRequest } from "./sandbox_api.ts";
import type { Episode, RewardContext, RewardFn, RewardResult } from "./types.ts";

/** The last fenced code block of `text`, or undefined. */
export function lastCodeBlock(text: string): string | undefined {
  const fences = [...text.matchAll(/```[^\n`]*\n/g)];
  for (let i = fences.length - 1; i >= 0; i--) {
    const start = fences[i].index! + fences[i][0].length;
    const end = text.indexOf("```", start);
    const code = (end < 0 ? text.slice(start) : text.slice(start, end)).trim();
    if (code) return code;
  }
  return undefined;
}

function testsOf(episode: Episode): { setup: string; tests: string[] } {
  const { task } = episode;
  if (!Array.isArray(task?.tests) || task.tests.length === 0) {
    throw new UserError(`reward code_exec: task ${task?.id} (episode ${episode.episodeId})`, {
      value: task?.tests ?? null,
      why: "the task has no tests to run",
      fix: "use an MBPP-style dataset with test_list, or remove code_exec from score.rewards",
    });
  }
  const setup = [...(task.test_imports ?? []), task.setup_code ?? ""].join("\n");
  return { setup, tests: task.tests };
}

/** Bytes per message line and of stderr, each process: room for large return values. */
const CODE_OUTPUT_BYTES = 1024 ** 2;

/** Runs one solution against its tests. */
export async function runTests(
  solution: string,
  setup: string,
  tests: string[],
  ctx: RewardContext,
): Promise<RewardResult> {
  if (!ctx.sandbox) throw new Error("code_exec: the score stage did not open a sandbox");
  const limits = { timeoutMs: ctx.codeTimeoutMs, maxOutputBytes: CODE_OUTPUT_BYTES };
  const programs: SessionRequest[] = [
    { language: "python", code: SERVER_PY, files: { [SOLUTION_FILE]: solution }, limits },
    {
      language: "python",
      code: TESTER_PY,
      files: { [TESTS_FILE]: JSON.stringify({ setup, tests }) },
      limits,
    },
  ];
  const status = await ctx.sandbox.withSessions(programs, ([server, tester]) => relay(server, tester));
  return status === "passed" ? { value: 1, status, correct: true } : { value: 0, status, correct: false };
}

/**
 * Passes each request of the tests' process to the solution's and its reply back, until the tests'
 * process gives its verdict or either process ends.
 */
async function relay(server: SandboxSession, tester: SandboxSession): Promise<string> {
  while (true) {
    const request = await tester.readLine();
    if (request === undefined) return testerEnded(await tester.wait());
    const verdict = verdictOf(request);
    if (verdict !== undefined) return verdict;
    await server.writeLine(request);
    const reply = await server.readLine();
    if (reply === undefined) return serverEnded(await server.wait());
    await tester.writeLine(reply);
  }
}

/** The status when the solution's process stopped answering. */
function serverEnded(end: SessionEnd): string {
  if (end.status === "ok") return "no_sentinel";
  return end.status === "error" || end.status === "closed" ? "solution_error" : end.status;
}

/** The status when the tests' process ended without a verdict. */
function testerEnded(end: SessionEnd): string {
  return end.status === "ok" || end.status === "error" || end.status === "closed" ? "error" : end.status;
}

export const codeExec: RewardFn = {
  name: "code_exec",
  doc: "1 when the final code block passes every test of the task in the sandbox",
  needsSandbox: true,
  score(episode, ctx) {
    const { setup, tests } = testsOf(episode);
    const code = lastCodeBlock(visibleText(episode.finalText));
    if (code === undefined) return { value: 0, status: "no_code", correct: false };
    return runTests(code, setup, tests, ctx);
  },
};
