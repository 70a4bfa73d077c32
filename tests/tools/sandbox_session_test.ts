/**
 * Sandbox sessions (lib/tools/sandbox_session.ts): a program the host talks to line by line, with the
 * bounds of a run (deadline, output cap) and, within one group, a separate jail per program.
 * Without bubblewrap these tests are skipped locally and fail in CI (`CI` set).
 */
import assert from "node:assert/strict";
import { openSandbox, type Sandbox } from "../../lib/tools/sandbox.ts";
import { findExecutable } from "../../lib/tools/sandbox_command.ts";
import type { SessionRequest } from "../../lib/tools/sandbox_session.ts";

const HAVE_BWRAP = (await findExecutable("bwrap")) !== undefined;
const ignore = !HAVE_BWRAP && Deno.env.get("CI") === undefined;

let opened: Promise<Sandbox> | undefined;
function sandbox(): Promise<Sandbox> {
  if (!HAVE_BWRAP) throw new Error("bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
  opened ??= openSandbox({ kind: "bwrap", unsafeNoSandbox: false, maxConcurrency: 2 });
  return opened;
}

const text = (line: Uint8Array | undefined) =>
  line === undefined ? undefined : new TextDecoder().decode(line);
const python = (code: string, limits: SessionRequest["limits"] = {}): SessionRequest => ({
  language: "python",
  code,
  limits: { timeoutMs: 10_000, ...limits },
});
const test = (name: string, fn: () => Promise<void>) => Deno.test({ name, ignore, fn });

const ECHO = "import sys\nfor line in sys.stdin:\n    print(line.strip().upper(), flush=True)\nprint('bye')";

test("a session answers line by line, in order, and reports how it ended", async () => {
  const end = await (await sandbox()).withSessions([python(ECHO)], async ([echo]) => {
    for (const word of ["one", "two", "three"]) {
      assert.equal(await echo.writeLine(word), true);
      assert.equal(text(await echo.readLine()), word.toUpperCase());
    }
    return await echo.close();
  });
  assert.equal(end.status, "closed");
  const exited = await (await sandbox()).withSessions(
    [python("print('a')\nprint('b', end='')")],
    async ([s]) => {
      assert.equal(text(await s.readLine()), "a");
      assert.equal(await s.readLine(), undefined, "a partial last line is dropped");
      return await s.wait();
    },
  );
  assert.deepEqual([exited.status, exited.exitCode], ["ok", 0]);
});

test("a line or stderr past the output cap kills the program (output_truncated), and nothing it says after counts", async () => {
  const flood = python("import sys\nwhile True:\n    sys.stdout.write('x' * 4096)", {
    maxOutputBytes: 64 * 1024,
  });
  const end = await (await sandbox()).withSessions([flood], async ([s]) => {
    assert.equal(await s.readLine(), undefined);
    return await s.wait();
  });
  assert.equal(end.status, "output_truncated");
  // A flood of stderr closes that pipe before the SIGKILL lands; a line written on EPIPE is not read.
  const late = python(
    "import sys\ntry:\n    while True:\n        sys.stderr.write('x' * 4096)\nexcept BrokenPipeError:\n" +
      "    print('after the kill', flush=True)",
    { maxOutputBytes: 64 * 1024 },
  );
  const [said, lateEnd] = await (await sandbox()).withSessions(
    [late],
    async ([s]) => [await s.readLine(), await s.wait()] as const,
  );
  assert.deepEqual([said, lateEnd.status], [undefined, "output_truncated"]);
});

test("a session past its deadline is killed (timeout) and says nothing more", async () => {
  const sleeper = python("import time\ntime.sleep(60)", { timeoutMs: 800 });
  const end = await (await sandbox()).withSessions([sleeper], async ([s]) => {
    assert.equal(await s.readLine(), undefined);
    return await s.wait();
  });
  assert.deepEqual([end.status, end.exitCode], ["timeout", null]);
});

test("the programs of one group run in separate jails: neither sees the other's processes or files", async () => {
  // Each starts a marked child (its last argument) and writes a marked file, waits until both have, then
  // looks around, and says whether its child still runs (None): a failure then tells a jail that saw too
  // much or too little from a child that had died. "ready" only once the child has exec'd.
  const look = (me: string) =>
    python(`import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "${me}-child"])
while b"${me}-child" not in open(f"/proc/{child.pid}/cmdline", "rb").read() and child.poll() is None:
    time.sleep(0.01)
open("/tmp/${me}-file", "w").close()
print("ready", flush=True)
sys.stdin.readline()
args = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            args.append(open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").rstrip("\\0").split("\\0"))
        except OSError:
            pass
print(sorted(os.listdir("/tmp")), sorted({a[-1] for a in args if a[-1].endswith("-child")}), child.poll(), flush=True)`);
  const seen = await (await sandbox()).withSessions([look("a"), look("b")], async (sessions) => {
    for (const s of sessions) assert.equal(text(await s.readLine()), "ready");
    for (const s of sessions) await s.writeLine("go");
    return await Promise.all(sessions.map(async (s) => text(await s.readLine())));
  });
  assert.deepEqual(seen, ["['a-file'] ['a-child'] None", "['b-file'] ['b-child'] None"]);
});
