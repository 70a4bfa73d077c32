/**
 * One adversarial test per promise of the sandbox (docs/sandbox.md): loops and daemons die, fork bombs
 * and floods are contained, secrets, network and host files stay out of reach, writes stay in.
 * Without bubblewrap these tests are skipped locally and fail in CI (`CI` set).
 */
import assert from "node:assert/strict";
import { UserError } from "../../lib/errors.ts";
import { openSandbox, type RunRequest, type Sandbox } from "../../lib/tools/sandbox.ts";
import { findExecutable } from "../../lib/tools/sandbox_command.ts";

const HAVE_BWRAP = (await findExecutable("bwrap")) !== undefined;
const IN_CI = Deno.env.get("CI") !== undefined;
const ignore = !HAVE_BWRAP && !IN_CI;
const TEMP = await Deno.makeTempDir({ prefix: "sandbox-test-" });
await Deno.chmod(TEMP, 0o711); // the sandbox user (nobody, when the tests run as root) must reach it
globalThis.addEventListener("unload", () => Deno.removeSync(TEMP, { recursive: true }));

let opened: Promise<Sandbox> | undefined;
function sandbox(): Promise<Sandbox> {
  if (!HAVE_BWRAP) throw new Error("bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
  opened ??= openSandbox({ kind: "bwrap", unsafeNoSandbox: false, tempDir: TEMP, maxConcurrency: 4 });
  return opened;
}

async function run(req: RunRequest) {
  return await (await sandbox()).run(req);
}

/** Host processes whose command line holds `token` (a process that escaped the sandbox). */
function hostProcessesWith(token: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      if (Deno.readTextFileSync(`/proc/${entry.name}/cmdline`).includes(token)) found.push(+entry.name);
    } catch { /* exited meanwhile */ }
  }
  return found;
}

/** Python that leaves a `sleep` child named by `token`, optionally in its own session. */
function sleeperPython(token: string, newSession: boolean): string {
  return [
    "import subprocess",
    `subprocess.Popen(["/bin/sh", "-c", "sleep 1000; : ${token}"], start_new_session=${
      newSession ? "True" : "False"
    })`,
  ].join("\n");
}

const test = (name: string, fn: () => Promise<void>) => Deno.test({ name, ignore, fn });

test("a program runs with stdin and its exit code is reported", async () => {
  const ok = await run({
    language: "python",
    code: "import sys; print(sys.stdin.read().upper())",
    stdin: "hi",
  });
  assert.deepEqual([ok.status, ok.exitCode, ok.stdout, ok.stderr], ["ok", 0, "HI\n", ""]);
  const bad = await run({ language: "python", code: "import sys; sys.stderr.write('boom'); sys.exit(3)" });
  assert.deepEqual([bad.status, bad.exitCode, bad.stderr], ["error", 3, "boom"]);
  const js = await run({ language: "javascript", code: "console.log(6 * 7)" });
  assert.deepEqual([js.status, js.stdout], ["ok", "42\n"]);
});

test("loops, sleeps and SIGTERM-ignoring programs time out within budget + 0.5 s, none left", async () => {
  const token = `tok${crypto.randomUUID().slice(0, 8)}`;
  const programs: RunRequest[] = [
    { language: "python", code: "while True: pass" },
    { language: "python", code: "import time; time.sleep(100)" },
    {
      language: "python",
      code: `${
        sleeperPython(token, true)
      }\nimport signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: pass`,
    },
    { language: "javascript", code: "while (true) {}" },
  ];
  for (const req of programs) {
    const t0 = performance.now();
    const result = await run({ ...req, limits: { timeoutMs: 800 } });
    const elapsed = performance.now() - t0;
    assert.deepEqual(result.status, "timeout", req.code);
    assert.deepEqual(result.exitCode, null);
    assert.ok(elapsed < 800 + 500, `took ${elapsed} ms`);
  }
  assert.deepEqual(hostProcessesWith(token), []);
});

test("a background daemon (setsid, start_new_session) does not survive the call", async () => {
  const token = `tok${crypto.randomUUID().slice(0, 8)}`;
  const code = [
    sleeperPython(token, true),
    "import os",
    "if os.fork() == 0:",
    "    os.setsid()",
    `    os.execv("/bin/sh", ["/bin/sh", "-c", "sleep 1000; : ${token}"])`,
    "print('parent done')",
  ].join("\n");
  const result = await run({ language: "python", code });
  assert.deepEqual([result.status, result.stdout], ["ok", "parent done\n"]);
  assert.deepEqual(hostProcessesWith(token), []);
});

test("the process limit holds, a fork bomb fails inside, and the next call still works", async () => {
  // First a bounded check that the limit is real (a fork bomb without it would hurt the host).
  const bounded = [
    "import os, time",
    "n = 0",
    "for i in range(100):",
    "    try: pid = os.fork()",
    "    except OSError: break",
    "    if pid == 0: time.sleep(1); os._exit(0)",
    "    n += 1",
    "print(n)",
  ].join("\n");
  const counted = await run({ language: "python", code: bounded, limits: { maxProcesses: 16 } });
  assert.match(counted.stdout, /^\d+\n$/, counted.stderr);
  assert.ok(Number(counted.stdout) < 16, `forked ${counted.stdout.trim()} with a limit of 16`);
  const bomb = "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass";
  const result = await run({ language: "python", code: bomb, limits: { maxProcesses: 16, timeoutMs: 1500 } });
  assert.deepEqual(result.status, "timeout");
  const next = await run({ language: "python", code: "print('alive')" });
  assert.deepEqual([next.status, next.stdout], ["ok", "alive\n"]);
});

test("an 8 GiB allocation or a growing heap is oom and the host stays up", async () => {
  const limits = { memoryBytes: 256 * 1024 ** 2 };
  const big = await run({ language: "python", code: "x = bytearray(8 << 30)", limits });
  assert.deepEqual(big.status, "oom");
  const grow = await run({ language: "python", code: "x = []\nwhile True: x.append(' ' * 10**6)", limits });
  assert.deepEqual(grow.status, "oom");
  const js = await run({
    language: "javascript",
    code: "const b = new Uint8Array(2 ** 31); b.fill(1);",
    limits,
  });
  assert.deepEqual(js.status, "oom", js.stderr);
});

test("1 GB of stdout is cut at the cap with a marker while memory stays flat", async () => {
  const before = Deno.memoryUsage().rss;
  const code = "import sys\nchunk = 'x' * 65536\nfor _ in range(16384): sys.stdout.write(chunk)";
  const result = await run({ language: "python", code, limits: { maxOutputBytes: 100_000 } });
  assert.deepEqual(result.status, "output_truncated");
  assert.deepEqual(result.exitCode, null);
  assert.ok(result.stdout.startsWith("x".repeat(100_000)));
  assert.match(result.stdout, /\n\[output truncated at 100000 bytes\]$/);
  assert.ok(result.ms < 5000, `took ${result.ms} ms`);
  assert.ok(Deno.memoryUsage().rss - before < 64 * 1024 ** 2, "host memory grew");
});

test("a large file write fails and the scratch directory is removed afterwards", async () => {
  const code = [
    "for path in ['big.bin', '/tmp/big.bin']:",
    "    try:",
    "        with open(path, 'wb') as f: f.write(b'0' * (8 << 20))",
    "        print(path, 'written')",
    "    except OSError as e: print(path, e.strerror)",
  ].join("\n");
  const result = await run({ language: "python", code, limits: { maxFileBytes: 1 << 20 } });
  assert.deepEqual(result.stdout, "big.bin File too large\n/tmp/big.bin File too large\n");
  assert.deepEqual([...Deno.readDirSync(TEMP)], []);
});

test("host files, secrets and the environment are out of reach", async () => {
  const repo = Deno.cwd();
  const code = [
    "import os",
    `for path in ['/etc/passwd', '/etc/shadow', '/root/.npmrc', os.path.expanduser('~/.npmrc'), ${
      JSON.stringify(repo + "/deno.json")
    }]:`,
    "    try: open(path).read(); print('READ', path)",
    "    except OSError as e: print('denied', type(e).__name__)",
    "print(sorted(os.environ))",
  ].join("\n");
  Deno.env.set("SANDBOX_TEST_SECRET", "hunter2");
  const result = await run({ language: "python", code });
  assert.ok(!result.stdout.includes("READ"), result.stdout);
  assert.deepEqual(result.stdout.split("\n").filter((l) => l.startsWith("denied")).length, 5);
  assert.match(result.stdout, /\['HOME', 'LANG', 'PATH', 'PWD', 'PYTHONDONTWRITEBYTECODE'\]/);
});

test("the network is unreachable: a loopback listener on the host and remote fetches", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let accepted = 0;
  const accepting = (async () => {
    for await (const conn of listener) {
      accepted++;
      conn.close();
    }
  })();
  const code = [
    "import socket, urllib.request",
    "try:",
    `    socket.create_connection(('127.0.0.1', ${listener.addr.port}), timeout=2); print('CONNECTED')`,
    "except OSError as e: print('refused', e.errno)",
    "try: urllib.request.urlopen('http://example.com', timeout=2); print('FETCHED')",
    "except OSError as e: print('refused', type(e).__name__)",
  ].join("\n");
  const result = await run({ language: "python", code });
  listener.close();
  await accepting.catch(() => {});
  assert.deepEqual(result.stdout.split("\n").filter((l) => l.startsWith("refused")).length, 2, result.stdout);
  assert.deepEqual(accepted, 0);
  const js = await run({ language: "javascript", code: "await import('https://example.com/x.js')" });
  assert.deepEqual(js.status, "error");
});

test("writes to /tmp, /dev/shm stay in the call, ../ is refused, and the next call sees none", async () => {
  const token = `tok${crypto.randomUUID().slice(0, 8)}`;
  const inside = [`/tmp/${token}`, `/dev/shm/${token}`, token];
  const write = [
    ...inside.map((p) => `open(${JSON.stringify(p)}, 'w').write('x')`),
    `try: open('../${token}', 'w')`,
    "except OSError as e: print(e.strerror)",
  ].join("\n");
  const wrote = await run({ language: "python", code: write });
  assert.deepEqual([wrote.status, wrote.stdout], ["ok", "Read-only file system\n"], wrote.stderr);
  const paths = [...inside, `../${token}`];
  for (const path of [`/tmp/${token}`, `/dev/shm/${token}`, `${Deno.cwd()}/../${token}`]) {
    assert.ok(!existsSync(path), `${path} is visible on the host`);
  }
  const look = `import os\nprint([p for p in ${JSON.stringify(paths)} if os.path.exists(p)])`;
  assert.deepEqual((await run({ language: "python", code: look })).stdout, "[]\n");
});

test("20 concurrent calls all finish with at most maxConcurrency running at once", async () => {
  const bounded = await openSandbox({ kind: "bwrap", unsafeNoSandbox: false, maxConcurrency: 2 });
  const code = "import time\nt = time.time()\ntime.sleep(0.1)\nprint(t, time.time())";
  const results = await Promise.all(
    Array.from({ length: 20 }, () => bounded.run({ language: "python", code })),
  );
  assert.ok(results.every((r) => r.status === "ok"));
  const spans = results.map((r) => r.stdout.trim().split(" ").map(Number));
  const overlap = Math.max(...spans.map(([s]) => spans.filter(([a, b]) => a <= s && s < b).length));
  assert.ok(overlap <= 2, `${overlap} programs ran at once`);
});

test("binary and invalid UTF-8 output comes back as valid UTF-8 with replacement characters", async () => {
  const code =
    "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe \\xc3')\nsys.stderr.buffer.write(b'\\x80')";
  const result = await run({ language: "python", code });
  assert.deepEqual(result.stdout, "ok \uFFFD\uFFFD \uFFFD");
  assert.deepEqual(result.stderr, "\uFFFD");
  assert.deepEqual(new TextDecoder().decode(new TextEncoder().encode(result.stdout)), result.stdout);
});

test("JavaScript on Deno runs with no permissions, no remote imports and a memory limit", async () => {
  // As root with Deno under a private home (npx), the sandbox runs a copy of it from this cache.
  const binaryCacheDir = `${TEMP}/binary-cache`;
  const deno = await openSandbox({
    kind: "bwrap",
    unsafeNoSandbox: false,
    javascript: "deno",
    binaryCacheDir,
  });
  const ok = await deno.run({ language: "javascript", code: "console.log(typeof Deno, 6 * 7)" });
  assert.deepEqual([ok.status, ok.stdout], ["ok", "object 42\n"]);
  const env = await deno.run({ language: "javascript", code: "console.log(Deno.env.get('HOME'))" });
  assert.deepEqual(env.status, "error");
  const remote = await deno.run({ language: "javascript", code: "await import('https://deno.land/x.ts')" });
  assert.deepEqual(remote.status, "error");
  const limits = { memoryBytes: 256 * 1024 ** 2 };
  const big = await deno.run({ language: "javascript", code: "new Uint8Array(2 ** 31).fill(1)", limits });
  assert.deepEqual(big.status, "oom", big.stderr);
});

Deno.test("sandbox none is refused without unsafe_no_sandbox, with a config error", async () => {
  await assert.rejects(
    () => openSandbox({ kind: "none", unsafeNoSandbox: false }),
    (e) => e instanceof UserError && e.message.includes("unsafe_no_sandbox"),
  );
});

Deno.test("sandbox none with unsafe_no_sandbox runs code and kills its process group in time", async () => {
  const none = await openSandbox({ kind: "none", unsafeNoSandbox: true });
  const token = `tok${crypto.randomUUID().slice(0, 8)}`;
  const code = `${sleeperPython(token, false)}\nwhile True: pass`;
  const result = await none.run({ language: "python", code, limits: { timeoutMs: 500 } });
  assert.deepEqual(result.status, "timeout");
  assert.deepEqual(hostProcessesWith(token), []);
});

function existsSync(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch {
    return false;
  }
}
