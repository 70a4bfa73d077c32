/**
 * The Python harness that runs a solution and its tests for `code_exec`, and how its output is read.
 *
 * The harness source is fixed and holds no secret. Everything per run arrives on stdin as JSON: the
 * solution, the setup code, the test lines, and a random nonce made by the score stage. The harness:
 * 1. binds what it needs before any model code runs: `os.write`, `os._exit`, `compile`, `exec`,
 *    `sys.settrace`, `sys.setprofile`, `threading.settrace`, a snapshot of the `builtins` namespace;
 * 2. reads stdin to its end and closes fd 0, builds the pass line `HARNESS-PASSED <nonce>` as bytes
 *    in a local variable and drops the nonce (it never reaches a global, a file or the model's
 *    namespace);
 * 3. runs the solution in a fresh namespace; any exception, `SystemExit` included, exits with code 3;
 * 4. undoes what the solution could have done to the tests' world: restores every builtin from the
 *    snapshot (monkeypatched `print`, `len`, `AssertionError`… come back), removes trace and profile
 *    hooks (which could jump over assert lines), puts the real `builtins` back in the namespace;
 * 5. compiles and runs setup code + test lines in that namespace, after the solution, so helpers or
 *    test functions the solution defined are redefined by the setup; an AssertionError exits 4, any
 *    other exception 5;
 * 6. only when its own code reaches the end: writes the pass line to fd 1 through the saved `os.write`
 *    and leaves through the saved `os._exit(0)` (no atexit hooks or threads run after it).
 *
 * The reader accepts a run only when the sandbox says `ok`, the exit code is 0 and the last line of
 * stdout is exactly the pass line. So `sys.exit(0)` or `os._exit(0)` before the asserts, printing
 * "PASSED" or any guessed sentinel, redefining helpers or the test functions, and patching builtins
 * all score 0.
 *
 * Not covered (docs/rewards.md): code that deliberately walks the interpreter's frames or the garbage
 * collector to find the harness's locals (the pass line lives in this process while the solution
 * runs; CPython cannot hide it from code in the same process), and return values that lie about
 * equality (an object whose `__eq__` is always true). The sandbox bounds time, memory and output.
 *
 * @module
 */

/** Exit codes the harness uses, and the reward status each maps to. */
export const HARNESS_EXITS: Readonly<Record<number, string>> = {
  3: "solution_error",
  4: "failed",
  5: "test_error",
};

/** The line the harness prints when every test passed. */
export function passLine(nonce: string): string {
  return `HARNESS-PASSED ${nonce}`;
}

/** The harness's Python source (no secrets: the nonce comes on stdin). */
export const HARNESS_PY = String.raw`
import builtins as _b, json as _json, os as _os, sys as _sys, threading as _threading

def _harness():
    write, exit_now, compile_, exec_ = _os.write, _os._exit, compile, exec
    settrace, setprofile, thread_settrace = _sys.settrace, _sys.setprofile, _threading.settrace
    BaseExc, AssertErr, dict_ = BaseException, AssertionError, dict
    real_builtins = _b
    bdict = _b.__dict__
    snapshot = dict_(bdict)
    payload = _json.loads(_sys.stdin.read())
    try:
        _os.close(0)
    except OSError:
        pass
    line = ("\nHARNESS-PASSED " + payload.pop("nonce") + "\n").encode()
    solution, setup, tests = payload["solution"], payload["setup"], payload["tests"]
    del payload
    ns = {"__name__": "__main__", "__builtins__": real_builtins}
    try:
        exec_(compile_(solution, "<solution>", "exec"), ns)
    except BaseExc:
        exit_now(3)
    settrace(None)
    setprofile(None)
    thread_settrace(None)
    bdict.clear()
    bdict.update(snapshot)
    ns["__builtins__"] = real_builtins
    try:
        exec_(compile_(setup + "\n" + "\n".join(tests) + "\n", "<tests>", "exec"), ns)
    except AssertErr:
        exit_now(4)
    except BaseExc:
        exit_now(5)
    write(1, line)
    exit_now(0)

_harness()
`;

/** The harness's stdin for one run. */
export function harnessInput(nonce: string, solution: string, setup: string, tests: string[]): string {
  return JSON.stringify({ nonce, solution, setup, tests });
}

/** Whether a finished run proves that every test passed. */
export function harnessPassed(stdout: string, exitCode: number | null, nonce: string): boolean {
  if (exitCode !== 0) return false;
  const lines = stdout.trimEnd().split("\n");
  return lines[lines.length - 1] === passLine(nonce);
}

/** A fresh 128-bit nonce, hex. */
export function makeNonce(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
