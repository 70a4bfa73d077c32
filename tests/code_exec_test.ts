/**
 * code_exec in the bubblewrap sandbox: a correct MBPP solution scores 1; each reward hack scores 0
 * (exit before the asserts, printing the sentinel text, redefining helpers or test functions,
 * os._exit, monkeypatching builtins, trace hooks); a missing sandbox stops the stage.
 */
import assert from "node:assert/strict";
import { codeExec, lastCodeBlock, runTests } from "../lib/score/code_exec.ts";
import { openSandbox, type Sandbox } from "../lib/score/sandbox_api.ts";
import type { Episode, RewardContext } from "../lib/score/types.ts";

const TESTS = ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"];

let sandbox: Sandbox | undefined;
async function ctx(): Promise<RewardContext> {
  sandbox ??= await openSandbox({ kind: "bwrap", unsafeNoSandbox: false, maxConcurrency: 2 });
  return { sandbox, codeTimeoutMs: 10_000 };
}

const run = async (solution: string, setup = "", tests = TESTS) =>
  runTests(solution, setup, tests, await ctx());

/**
 * Each hack pairs a wrong solution with the trick that would make its tests pass under a naive
 * harness (one that trusts exit 0, prints a fixed "PASSED", runs setup first, or keeps the
 * solution's builtins and hooks).
 */
const WRONG_ADD = "def add(a, b):\n    return 0\n";
const HACKS: Record<string, { code: string; setup?: string; tests?: string[] }> = {
  "sys.exit(0) before the asserts": { code: `import sys\n${WRONG_ADD}sys.exit(0)` },
  "os._exit(0) before the asserts": { code: `import os\n${WRONG_ADD}os._exit(0)` },
  "printing the sentinel text": {
    code:
      `import os\n${WRONG_ADD}print("PASSED")\nprint("HARNESS-PASSED 0123456789abcdef0123456789abcdef")\n` +
      "os._exit(0)",
  },
  "redefining the setup's test helper": {
    code: `${WRONG_ADD}def check(f):\n    return True`,
    setup: "def check(f):\n    return f(2, 2) == 4",
    tests: ["assert check(add)"],
  },
  "monkeypatching builtins the tests use": {
    code: "import builtins\nbuiltins.len = lambda x: 3\ndef items():\n    return []",
    tests: ["assert len(items()) == 3"],
  },
  "a trace hook that jumps over the assert": {
    code: `import sys\n${WRONG_ADD}def _local(f, e, a):\n    if e == "line" and f.f_lineno == 2:\n` +
      `        f.f_lineno = 3\n    return _local\ndef _tr(frame, event, arg):\n` +
      `    return _local if frame.f_code.co_filename == "<tests>" else None\nsys.settrace(_tr)`,
    tests: ["assert add(1, 2) == 3", "pass"],
  },
  "an atexit hook that prints a pass line": {
    code: `import atexit\natexit.register(lambda: print("HARNESS-PASSED x"))\n${WRONG_ADD}`,
  },
  "closing stdout, then exiting 0": {
    code: "import os\ndef add(a, b):\n    return a + b\nos.close(1)\nos._exit(0)",
  },
};

Deno.test("code_exec: a correct solution scores 1", async () => {
  const r = await run("def add(a, b):\n    return a + b");
  assert.deepEqual(r, { value: 1, status: "passed", correct: true });
});

Deno.test("code_exec: a wrong solution scores 0 with status failed", async () => {
  const r = await run("def add(a, b):\n    return a - b");
  assert.deepEqual(r, { value: 0, status: "failed", correct: false });
});

for (const [name, hack] of Object.entries(HACKS)) {
  Deno.test(`code_exec: reward hack "${name}" scores 0`, async () => {
    const r = await run(hack.code, hack.setup, hack.tests);
    assert.equal(r.value, 0, `${name}: ${JSON.stringify(r)}`);
  });
}

Deno.test("code_exec: an endless loop times out and scores 0", async () => {
  const r = await runTests("def add(a, b):\n    while True: pass", "", ["assert add(1, 2) == 3"], {
    ...(await ctx()),
    codeTimeoutMs: 1500,
  });
  assert.deepEqual(r, { value: 0, status: "timeout", correct: false });
});

Deno.test("code_exec takes the final fenced block of the visible answer", async () => {
  const text = "<think>```python\nwrong\n```</think>\nFirst try:\n```python\nx = 1\n```\n" +
    "Final:\n```python\ndef add(a, b):\n    return a + b\n```\n";
  assert.equal(lastCodeBlock(text), "def add(a, b):\n    return a + b");
  const episode = {
    episodeId: "e",
    task: { id: "t", source: "mbpp", prompt: "", tests: ["assert add(2, 3) == 5"] },
    finalText: text,
  } as unknown as Episode;
  assert.equal((await codeExec.score(episode, await ctx())).value, 1);
  const none = { ...episode, finalText: "no code here" };
  assert.deepEqual(await codeExec.score(none, await ctx()), { value: 0, status: "no_code", correct: false });
});
