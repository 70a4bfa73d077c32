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
 * Why not `deno test --parallel`: it runs the files as workers of one process, which share the process's
 * environment, working directory, pid and native libraries; there two files using onnxruntime at once
 * crashed the process (SIGSEGV), and tests that look at their own process (its children, its memory, the
 * profile knob in its environment) saw the other files'. Processes of their own share only the machine.
 *
 * @module
 */

import { join, relative, resolve } from "node:path";
import { UserError } from "../lib/errors.ts";
import { pathExists } from "../lib/fs/read.ts";
import { noTests, testSummary, type TestTotals, totalsLine } from "./test_summary.ts";

const ROOT = new URL("..", import.meta.url).pathname;

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

/** The `deno` processes running now, stopped with the runner (a SIGTERM to it alone would orphan them). */
const running = new Set<Deno.ChildProcess>();

/** On SIGTERM or SIGINT: the running `deno` processes are stopped, then the runner exits (143, 130). */
function stopChildrenOnSignals(): void {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    Deno.addSignalListener(signal, () => {
      for (const child of running) child.kill("SIGTERM");
      Deno.exit(signal === "SIGTERM" ? 143 : 130);
    });
  }
}

/** One `deno` command's exit code and its stdout and stderr together, in the order written. */
async function denoOutput(args: string[]): Promise<{ code: number; text: string }> {
  const child = new Deno.Command("sh", {
    args: ["-c", 'exec "$0" "$@" 2>&1', Deno.execPath(), ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  running.add(child);
  try {
    const out = await child.output();
    return { code: out.code, text: new TextDecoder().decode(out.stdout) };
  } finally {
    running.delete(child);
  }
}

/** Runs one test file; prints its output; returns its counts (a file with no summary counts as failed). */
async function runFile(file: string, passThrough: string[]): Promise<TestTotals> {
  const { code, text } = await denoOutput(["test", "--allow-all", "--no-check", ...passThrough, file]);
  console.log(text.trimEnd());
  const totals = testSummary(text);
  if (totals && (code === 0 || totals.failed > 0)) return totals;
  console.log(`${relative(ROOT, file)}: deno test exited ${code} without a failed test in its summary`);
  return { ...(totals ?? noTests()), failed: (totals?.failed ?? 0) + 1 };
}

/** Runs `files`, `jobs` at a time, in their order; the failed files and the counts added up. */
async function runAll(files: string[], jobs: number, passThrough: string[]) {
  const totals = noTests();
  const failedFiles: string[] = [];
  const queue = [...files];
  const worker = async () => {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const t = await runFile(file, passThrough);
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

async function main(args: string[]): Promise<number> {
  const started = performance.now();
  const jobs = jobCount();
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
  const { totals, failedFiles } = await runAll(files, jobs, passThrough);
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
