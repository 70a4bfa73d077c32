/**
 * `deno task test`: every test file under tests/, type-checked once, then run a few at a time, each in a
 * `deno test` process of its own, with its output printed whole when it ends and one summary at the end
 * in `deno test`'s form (`ok | N passed (S steps) | N failed (time)`), which `.ci/run` reads.
 *
 *   deno task test                         every test file, DENO_JOBS (default: the CPU count) at a time
 *   deno task test tests/run tests/x_test.ts --filter=resume
 *
 * Arguments naming an existing file or directory choose the test files (the files in a directory whose
 * names end in `_test.ts`, `.test.ts` or are `test.ts`, like `deno test`); the others are passed to each
 * `deno test`.
 *
 * A file still running after `DENO_TEST_TIMEOUT` seconds (default 900; the slowest takes about 350 beside
 * another on 2 cores, so a slow machine does not fail for time) is stopped with every process it started,
 * its output so far is printed, and it counts as failed: a test that hangs names itself and the run still
 * ends with its summary, where its output would otherwise never be printed. A SIGTERM or SIGINT to the
 * runner stops the running files the same way and prints what they wrote (a CI job stopped for time shows
 * where it was), then exits.
 *
 * Why not `deno test --parallel`: it runs the files as workers of one process, which share the process's
 * environment, working directory, pid and native libraries; there two files using onnxruntime at once
 * crashed the process (SIGSEGV), and tests that look at their own process (its children, its memory, the
 * profile knob in its environment) saw the other files'. Processes of their own share only the machine.
 *
 * @module
 */

import { join, relative, resolve } from "node:path";
import { parentFromStat } from "../lib/cli/proc_parent.ts";
import { UserError } from "../lib/errors.ts";
import { pathExists } from "../lib/fs/read.ts";
import { noTests, testSummary, type TestTotals, totalsLine } from "./test_summary.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/**
 * Files that take the longest (half a minute to five minutes each on 2 cores) start first, so that no
 * long one is left running alone at the end. Only the order depends on this list; a stale entry costs a
 * little time.
 */
const SLOW_FIRST = [
  "tests/repo/readme_examples_test.ts",
  "tests/run/loop_test.ts",
  "tests/bench/gpu_test.ts",
  "tests/run/ppo_loop_test.ts",
  "tests/run/filter_groups_test.ts",
  "tests/repo/readme_commands_test.ts",
  "tests/engine/kernel_count_test.ts",
  "tests/cli/output_cases_test.ts",
];

const TEST_FILE = /(^|[._])test\.(ts|tsx|mts|js|jsx|mjs)$/;

/** The test files under `path` (a file is taken as it is), sorted. */
async function testFiles(path: string): Promise<string[]> {
  if ((await Deno.stat(path)).isFile) return [path];
  const found: string[] = [];
  for await (const entry of Deno.readDir(path)) {
    const child = join(path, entry.name);
    if (entry.isDirectory) found.push(...await testFiles(child));
    else if (entry.isFile && TEST_FILE.test(entry.name)) found.push(child);
  }
  return found.sort();
}

/** `SLOW_FIRST`'s files first, then the rest in path order. */
function slowFirst(files: string[]): string[] {
  const rank = (f: string) => {
    const i = SLOW_FIRST.indexOf(relative(ROOT, f));
    return i < 0 ? SLOW_FIRST.length : i;
  };
  return [...files].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** Seconds a test file may run by default (`DENO_TEST_TIMEOUT`). */
const FILE_TIMEOUT_S = 900;

/** The `deno` processes running now, stopped with the runner (a SIGTERM to it alone would orphan them). */
const running = new Set<Deno.ChildProcess>();
/** The files running now, each settled once its output is printed. */
const printing = new Set<Promise<TestTotals>>();
/** Set by SIGTERM or SIGINT: no file starts after it. */
let stopping = false;
/** How long a SIGTERM or SIGINT waits for the stopped files' output before the runner exits. */
const STOP_GRACE_MS = 3_000;

/**
 * `roots` and every process below them (Linux's /proc; the roots alone elsewhere), from one read of the
 * process table. The test processes stay in the runner's process group, so that a terminal's or a CI job's
 * signal to the group still reaches them.
 */
async function processTrees(roots: readonly number[]): Promise<number[]> {
  // Deno grants /proc to --allow-all only; a shell reads each process's stat line instead.
  const script = 'for f in /proc/[0-9]*/stat; do read -r line < "$f" && printf "%s\\n" "$line"; done';
  const out = await new Deno.Command("sh", { args: ["-c", script], stdout: "piped", stderr: "null" })
    .output();
  const children = new Map<number, number[]>();
  for (const stat of new TextDecoder().decode(out.stdout).split("\n")) {
    const ppid = parentFromStat(stat);
    if (ppid) children.set(ppid, [...(children.get(ppid) ?? []), parseInt(stat)]);
  }
  const tree = [...roots];
  for (let i = 0; i < tree.length; i++) tree.push(...(children.get(tree[i]) ?? []));
  return tree;
}

/** Sends `signal` to each of `pids`; those that have ended are passed over. */
function signalAll(pids: readonly number[], signal: Deno.Signal): void {
  for (const pid of pids) {
    try {
      Deno.kill(pid, signal);
    } catch {
      // it has ended
    }
  }
}

/**
 * On SIGTERM or SIGINT: no file starts, the running `deno` processes and theirs are sent SIGTERM, their
 * output so far is printed (for up to STOP_GRACE_MS; then SIGKILL for what is left of them, found before
 * the SIGTERM, as a child that outlives its parent is no longer below it), and the runner exits (143, 130).
 */
function stopChildrenOnSignals(): void {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    Deno.addSignalListener(signal, async () => {
      stopping = true;
      const printed = Promise.allSettled([...printing]);
      const pids = await processTrees([...running].map((child) => child.pid));
      signalAll(pids, "SIGTERM");
      await Promise.race([printed, new Promise((r) => setTimeout(r, STOP_GRACE_MS))]);
      signalAll(pids, "SIGKILL");
      Deno.exit(signal === "SIGTERM" ? 143 : 130);
    });
  }
}

/**
 * One `deno` command's exit code and its stdout and stderr together, in the order written; killed with
 * every process it started after `timeoutMs` (`timedOut` then true, and the output what it wrote until
 * then: a hung test is past saving, and what it left running would hold the output pipe open).
 */
async function denoOutput(
  args: string[],
  timeoutMs = Infinity,
): Promise<{ code: number; text: string; timedOut: boolean }> {
  const child = new Deno.Command("sh", {
    args: ["-c", 'exec "$0" "$@" 2>&1', Deno.execPath(), ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  running.add(child);
  let timedOut = false;
  const timer = Number.isFinite(timeoutMs)
    ? setTimeout(() => {
      timedOut = true;
      processTrees([child.pid]).then((pids) => signalAll(pids, "SIGKILL"));
    }, timeoutMs)
    : undefined;
  try {
    const out = await child.output();
    return { code: out.code, text: new TextDecoder().decode(out.stdout), timedOut };
  } finally {
    clearTimeout(timer);
    running.delete(child);
  }
}

/** Why a file's run counts as one failure more than its summary says; null where the summary says it all. */
function extraFailure(
  run: { code: number; timedOut: boolean },
  totals: TestTotals | null,
  timeoutS: number,
): string | null {
  if (stopping && !totals) return "stopped with the runner";
  if (run.timedOut) {
    return `stopped after ${timeoutS} s, the most a test file may run (DENO_TEST_TIMEOUT; raise it on a slower machine)`;
  }
  if (totals && (run.code === 0 || totals.failed > 0)) return null;
  return `deno test exited ${run.code} without a failed test in its summary`;
}

/**
 * Runs one test file, stopped after `timeoutS` seconds; prints its output; returns its counts (a file with
 * no summary, or stopped, counts as failed).
 */
async function runFile(file: string, passThrough: string[], timeoutS: number): Promise<TestTotals> {
  const run = await denoOutput(["test", "--allow-all", "--no-check", ...passThrough, file], timeoutS * 1000);
  console.log(run.text.trimEnd());
  const totals = testSummary(run.text);
  const failure = extraFailure(run, totals, timeoutS);
  if (!failure) return totals!;
  console.log(`${relative(ROOT, file)}: ${failure}`);
  return { ...(totals ?? noTests()), failed: (totals?.failed ?? 0) + 1 };
}

/** Runs `files`, `jobs` at a time, in their order; the failed files and the counts added up. */
async function runAll(files: string[], jobs: number, timeoutS: number, passThrough: string[]) {
  const totals = noTests();
  const failedFiles: string[] = [];
  const queue = [...files];
  const worker = async () => {
    for (let file = queue.shift(); file && !stopping; file = queue.shift()) {
      const run = runFile(file, passThrough, timeoutS);
      printing.add(run);
      const t = await run.finally(() => printing.delete(run));
      for (const key of Object.keys(totals) as (keyof TestTotals)[]) totals[key] += t[key];
      if (t.failed > 0) failedFiles.push(relative(ROOT, file));
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, files.length) }, worker));
  return { totals, failedFiles };
}

/** DENO_JOBS, or the CPU count; a one-line UserError where DENO_JOBS is not a positive whole number. */
function jobCount(): number {
  const set = Deno.env.get("DENO_JOBS");
  if (set === undefined) return navigator.hardwareConcurrency;
  const jobs = Number(set);
  if (Number.isInteger(jobs) && jobs > 0) return jobs;
  throw new UserError("DENO_JOBS", {
    value: set,
    why: "it says how many test files run at a time, a whole number from 1",
    fix: "set DENO_JOBS=2, say, or unset it for one per CPU",
  });
}

/** DENO_TEST_TIMEOUT, or FILE_TIMEOUT_S; a one-line UserError where it is not a positive number. */
function fileTimeout(): number {
  const set = Deno.env.get("DENO_TEST_TIMEOUT");
  if (set === undefined) return FILE_TIMEOUT_S;
  const seconds = Number(set);
  if (set.trim() !== "" && Number.isFinite(seconds) && seconds > 0) return seconds;
  throw new UserError("DENO_TEST_TIMEOUT", {
    value: set,
    why: "it says how many seconds a test file may run before it is stopped and counted as failed",
    fix: `set DENO_TEST_TIMEOUT=1200, say, or unset it for ${FILE_TIMEOUT_S}`,
  });
}

async function main(args: string[]): Promise<number> {
  const started = performance.now();
  const jobs = jobCount();
  const timeoutS = fileTimeout();
  stopChildrenOnSignals();
  const paths: string[] = [];
  const passThrough: string[] = [];
  const cwd = Deno.env.get("INIT_CWD") ?? Deno.cwd(); // deno task runs us in the repository's root
  for (const arg of args) {
    const path = resolve(cwd, arg);
    await pathExists(path) ? paths.push(path) : passThrough.push(arg);
  }
  const files = slowFirst(
    (await Promise.all((paths.length ? paths : [join(ROOT, "tests")]).map(testFiles))).flat(),
  );
  if (files.length === 0) {
    throw new UserError("deno task test", {
      value: paths.join(" "),
      why: "no test files there (names ending in _test.ts, .test.ts, or test.ts)",
      fix: "name a test file or a directory that holds some",
    });
  }
  const check = await denoOutput(["check", ...files]);
  if (check.code !== 0) {
    console.log(check.text.trimEnd());
    console.log(totalsLine({ ...noTests(), failed: 1 }, performance.now() - started));
    return 1;
  }
  const count = files.length === 1 ? "1 test file" : `${files.length} test files`;
  console.log(`running ${count}, ${Math.min(jobs, files.length)} at a time, each in its own process`);
  const { totals, failedFiles } = await runAll(files, jobs, timeoutS, passThrough);
  if (failedFiles.length) {
    console.log(`\nfiles with failures:\n${failedFiles.sort().map((f) => `  ${f}`).join("\n")}`);
  }
  console.log(`\n${totalsLine(totals, performance.now() - started)}`);
  return totals.failed > 0 ? 1 : 0;
}

if (import.meta.main) {
  try {
    Deno.exit(await main(Deno.args));
  } catch (error) {
    if (!(error instanceof UserError)) throw error;
    console.error(`error: ${error.message}`);
    Deno.exit(2);
  }
}
