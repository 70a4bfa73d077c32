/**
 * `deno task test` (scripts/test.ts, scripts/test_summary.ts): test files run in processes of their own,
 * two at a time, and one summary adds up their counts in `deno test`'s form; a file that fails, or whose
 * process dies without a summary, makes the run fail and is named; each file's process is its own (its
 * pid and environment are not another file's).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { formatDuration, testSummary, totalsLine } from "../../scripts/test_summary.ts";
import { denoRunArgs, ROOT } from "../helpers/commands.ts";

Deno.test("testSummary reads deno test's counts, steps apart, and totalsLine writes them back", () => {
  const line = "FAILED | 1 passed (1 step) | 2 failed (3 steps) | 1 ignored | 4 filtered out (32ms)";
  const totals = testSummary(
    `running 4 tests\n\x1b[31m${line.slice(0, 6)}\x1b[0m${line.slice(6)}\n\nerror: x`,
  );
  assert.deepEqual(totals, {
    passed: 1,
    passedSteps: 1,
    failed: 2,
    failedSteps: 3,
    ignored: 1,
    ignoredSteps: 0,
    filtered: 4,
  });
  assert.equal(totalsLine(totals!, 32), line);
  assert.equal(testSummary("ok | 774 passed (123 steps) | 0 failed (20m36s)")?.passedSteps, 123);
  assert.equal(testSummary("no summary here"), null);
  assert.deepEqual([formatDuration(340), formatDuration(12_400), formatDuration(303_000)], [
    "340ms",
    "12s",
    "5m3s",
  ]);
});

/** Writes test files into a new directory: name → source. */
async function testDir(files: Record<string, string>): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "test-runner-" });
  for (const [name, code] of Object.entries(files)) await Deno.writeTextFile(join(dir, name), code);
  return dir;
}

/** `deno task test DIR …` as the task runs it (`env` added to its environment); exit code and output. */
async function runner(args: string[], jobs = "2", env: Record<string, string> = {}) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs("scripts/test.ts"), ...args], // the task's own permissions
    cwd: ROOT,
    env: { NO_COLOR: "1", DENO_JOBS: jobs, ...env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  return { code: out.code, text, last: text.trimEnd().split("\n").at(-1)! };
}

/** Whether process `pid` is gone, waiting up to `ms` for it to go. */
async function gone(pid: string, ms = 10_000): Promise<boolean> {
  for (let waited = 0; waited < ms; waited += 50) {
    if (!(await Deno.stat(`/proc/${pid}`).then(() => true, () => false))) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return false;
}

// Each file records its process's pid, sets a variable the other would see in a shared environment, and
// waits (up to a minute) until the other file has started: two at a time, or neither ends well.
const pairFile = (name: string, other: string, dir: string) => `
const at = (n: string) => ${JSON.stringify(dir)} + "/" + n;
Deno.test("pair file ${name} runs in its own process, beside ${other}", async () => {
  if (Deno.env.get("SEEN_BY_ANOTHER")) throw new Error("another file's environment");
  Deno.env.set("SEEN_BY_ANOTHER", "${name}");
  Deno.writeTextFileSync(at("${name}.pid"), String(Deno.pid));
  for (let i = 0; i < 600; i++) {
    if (await Deno.stat(at("${other}.pid")).then(() => true, () => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("${other} did not start while ${name} ran");
});
Deno.test("pair file ${name} steps", async (t) => { await t.step("one", () => {}); });
`;

Deno.test("the runner runs two files at a time, each in a process of its own, and adds up their counts", async () => {
  const dir = await testDir({});
  await Deno.writeTextFile(join(dir, "a_test.ts"), pairFile("a", "b", dir));
  await Deno.writeTextFile(join(dir, "b_test.ts"), pairFile("b", "a", dir));
  await Deno.writeTextFile(join(dir, "skip_test.ts"), 'Deno.test({ name: "i", ignore: true, fn() {} });');
  await Deno.writeTextFile(join(dir, "helper.ts"), "throw new Error('not a test file: never run');");
  const r = await runner([dir]);
  assert.equal(r.code, 0, r.text);
  assert.match(r.last, /^ok \| 4 passed \(2 steps\) \| 0 failed \| 1 ignored \(\d+(ms|s)\)$/, r.text);
  assert.match(r.text, /running 3 test files, 2 at a time/);
  const pids = await Promise.all(["a", "b"].map((n) => Deno.readTextFile(join(dir, `${n}.pid`))));
  assert.notEqual(pids[0], pids[1], "two files ran in one process");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a failing file and one that dies without a summary fail the run and are named", async () => {
  const dir = await testDir({
    "fails_test.ts": 'Deno.test("ok", () => {});\nDeno.test("bad", () => { throw new Error("boom"); });',
    "dies_test.ts":
      'Deno.test("never ends", async () => { await new Promise(() => Deno.kill(Deno.pid, "SIGKILL")); });',
    "fine_test.ts": 'Deno.test("fine", () => {});',
  });
  const r = await runner([dir, "--filter=/^(ok|bad|never ends)$/"]);
  assert.equal(r.code, 1, r.text);
  assert.match(r.last, /^FAILED \| 1 passed \| 2 failed \| 1 filtered out \(/, r.text);
  assert.match(r.text, /dies_test\.ts: deno test exited 137 without a failed test in its summary/);
  assert.match(r.text, /files with failures:\n {2}\S*dies_test\.ts\n {2}\S*fails_test\.ts\n/);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a file that hangs is killed after DENO_TEST_TIMEOUT with what it started, its output kept, and named", async () => {
  const dir = await testDir({ "fine_test.ts": 'Deno.test("fine", () => {});' });
  const sleepPid = join(dir, "sleep.pid");
  await Deno.writeTextFile(
    join(dir, "hangs_test.ts"),
    `Deno.test("done before", () => {});
Deno.test("hangs", async () => {
  const sleeper = new Deno.Command("sleep", { args: ["600"] }).spawn();
  Deno.writeTextFileSync(${JSON.stringify(sleepPid)}, String(sleeper.pid));
  console.log("written before the hang");
  await new Promise((r) => setTimeout(r, 600_000));
});`,
  );
  // 15 s: time for the file to start and reach its hang on a loaded machine (its own work takes under 1 s).
  const r = await runner([dir], "2", { DENO_TEST_TIMEOUT: "15" });
  assert.equal(r.code, 1, r.text);
  assert.match(r.text, /done before \.\.\. ok/, "the output before the hang is printed");
  assert.match(r.text, /written before the hang/);
  assert.match(
    r.text,
    /hangs_test\.ts: stopped after 15 s, the most a test file may run \(DENO_TEST_TIMEOUT/,
  );
  assert.match(r.text, /files with failures:\n {2}\S*hangs_test\.ts\n/);
  assert.match(r.last, /^FAILED \| 1 passed \| 1 failed \(/, "the hung file counts as one failure");
  assert.ok(
    await gone(await Deno.readTextFile(sleepPid), 5_000),
    "the process the hung test started outlived it",
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a file that does not type-check fails the run before any test runs", async () => {
  const dir = await testDir({
    "typed_test.ts": 'const n: number = "text";\nDeno.test("x", () => { Deno.exit(9); });\nexport { n };',
  });
  const r = await runner([dir]);
  assert.equal(r.code, 1, r.text);
  assert.match(r.text, /TS2322/);
  assert.match(r.last, /^FAILED \| 0 passed \| 1 failed \(/);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("SIGTERM to the runner stops the test processes it started, and theirs, and prints what they wrote", async () => {
  const dir = await testDir({});
  const at = (name: string) => join(dir, name);
  await Deno.writeTextFile(
    at("slow_test.ts"),
    `Deno.test("slow", async () => {
  const sleeper = new Deno.Command("sleep", { args: ["600"] }).spawn();
  Deno.writeTextFileSync(${JSON.stringify(at("sleep.pid"))}, String(sleeper.pid));
  console.log("written before the stop");
  Deno.writeTextFileSync(${JSON.stringify(at("slow.pid"))}, String(Deno.pid));
  await new Promise((r) => setTimeout(r, 600_000));
});`,
  );
  // A file that ignores SIGTERM: it must not outlive the runner either, nor hold it up for long.
  await Deno.writeTextFile(
    at("stubborn_test.ts"),
    `Deno.test("stubborn", async () => {
  Deno.addSignalListener("SIGTERM", () => {});
  Deno.writeTextFileSync(${JSON.stringify(at("stubborn.pid"))}, String(Deno.pid));
  await new Promise((r) => setTimeout(r, 600_000));
});`,
  );
  // Started only if the runner starts a file after the SIGTERM (here while it waits for the stubborn one).
  await Deno.writeTextFile(
    at("then_test.ts"),
    `Deno.writeTextFileSync(${
      JSON.stringify(at("then.started"))
    }, "");\nDeno.test("never started", () => {});`,
  );
  const child = new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs("scripts/test.ts"), dir],
    cwd: ROOT,
    env: { NO_COLOR: "1", DENO_JOBS: "2" },
    stdout: "piped",
    stderr: "null",
  }).spawn();
  const pids: string[] = [];
  for (const name of ["slow.pid", "stubborn.pid"]) {
    let pid = "";
    for (let i = 0; i < 1200 && !pid; i++) {
      pid = await Deno.readTextFile(at(name)).catch(() => "");
      if (!pid) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(pid, `${name}: the test file started`);
    pids.push(pid);
  }
  child.kill("SIGTERM");
  const out = await child.output();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 143, text);
  assert.match(text, /written before the stop\n[^]*slow_test\.ts: stopped with the runner\n/);
  for (const pid of [...pids, await Deno.readTextFile(at("sleep.pid"))]) {
    assert.ok(await gone(pid), `process ${pid} outlived the runner:\n${text}`);
  }
  await new Promise((r) => setTimeout(r, 2_000)); // time for a file started by mistake to begin
  assert.ok(
    !(await Deno.stat(at("then.started")).then(() => true, () => false)),
    "a file started after the SIGTERM",
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a bad DENO_JOBS or DENO_TEST_TIMEOUT, or a path without test files, is one line and exit 2, before any check", async () => {
  const dir = await testDir({ "a_test.ts": 'Deno.test("a", () => {});' });
  for (const jobs of ["0", "two", "1.5"]) {
    const r = await runner([dir], jobs);
    assert.equal(r.code, 2, r.text);
    assert.equal(
      r.text.trim(),
      `error: DENO_JOBS (got "${jobs}"): it says how many test files run at a time, a whole number from 1. Fix: set DENO_JOBS=2, say, or unset it for one per CPU`,
    );
  }
  for (const timeout of ["0", "ten", "", "-5"]) {
    const r = await runner([dir], "2", { DENO_TEST_TIMEOUT: timeout });
    assert.equal(r.code, 2, r.text);
    assert.equal(
      r.text.trim(),
      `error: DENO_TEST_TIMEOUT (got "${timeout}"): it says how many seconds a test file may run before it is stopped and counted as failed. Fix: set DENO_TEST_TIMEOUT=1200, say, or unset it for 900`,
    );
  }
  await Deno.remove(join(dir, "a_test.ts"));
  const none = await runner([dir]);
  assert.equal(none.code, 2, none.text);
  assert.match(
    none.text.trim(),
    /^error: deno task test \(got ".*"\): no test files there .*\. Fix: [^\n]*$/,
  );
  await Deno.remove(dir, { recursive: true });
});
