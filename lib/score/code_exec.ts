/**
 * `code_exec` (MBPP): 1 when the model's final code block passes every test of the task, run in the
 * rollout's sandbox through the harness of code_harness.ts, else 0.
 *
 * The solution is the last fenced code block (```python … ``` or ``` … ```; an unclosed fence runs to
 * the end) of the final assistant message's visible text. Setup = the task's `test_imports` lines,
 * then its `setup_code`; tests = `task.tests`.
 *
 * Statuses: `passed`; model failures (value 0): `no_code`, `solution_error` (the solution raised or
 * exited), `failed` (an assert failed), `test_error` (another exception in the tests), `no_sentinel`
 * (exit 0 without the harness's pass line: an early exit), `error`, `timeout`, `oom`,
 * `output_truncated`. A task without tests is bad data (UserError); a sandbox that cannot run throws
 * and stops the stage.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { visibleText } from "./answer.ts";
import { HARNESS_EXITS, HARNESS_PY, harnessInput, harnessPassed, makeNonce } from "./code_harness.ts";
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

/** Runs one solution against its tests. */
export async function runTests(
  solution: string,
  setup: string,
  tests: string[],
  ctx: RewardContext,
): Promise<RewardResult> {
  if (!ctx.sandbox) throw new Error("code_exec: the score stage did not open a sandbox");
  const nonce = makeNonce();
  const run = await ctx.sandbox.run({
    language: "python",
    code: HARNESS_PY,
    stdin: harnessInput(nonce, solution, setup, tests),
    limits: { timeoutMs: ctx.codeTimeoutMs },
  });
  if (run.status === "ok" && harnessPassed(run.stdout, run.exitCode, nonce)) {
    return { value: 1, status: "passed", correct: true };
  }
  const status = run.status === "ok"
    ? (run.exitCode === 0 ? "no_sentinel" : HARNESS_EXITS[run.exitCode ?? -1] ?? "error")
    : run.status === "error"
    ? HARNESS_EXITS[run.exitCode ?? -1] ?? "error"
    : run.status;
  return { value: 0, status, correct: false };
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
