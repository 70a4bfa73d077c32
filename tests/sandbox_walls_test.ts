/**
 * The walls of the sandbox that the adversarial tests in sandbox_test.ts do not reach: the writable
 * space of a run is the three sized tmpfs mounts and nothing else (measured as the host's shared memory
 * while a program fills every place it can write).
 * Without bubblewrap these tests are skipped locally and fail in CI (`CI` set).
 */
import assert from "node:assert/strict";
import { openSandbox, type Sandbox } from "../lib/tools/sandbox.ts";
import { findExecutable, SANDBOX_HOME } from "../lib/tools/sandbox_command.ts";

const HAVE_BWRAP = (await findExecutable("bwrap")) !== undefined;
const ignore = !HAVE_BWRAP && Deno.env.get("CI") === undefined;
const TEMP = await Deno.makeTempDir({ prefix: "sandbox-walls-test-" });
await Deno.chmod(TEMP, 0o711); // the sandbox user (nobody, when the tests run as root) must reach it
globalThis.addEventListener("unload", () => Deno.removeSync(TEMP, { recursive: true }));

const test = (name: string, fn: () => Promise<void>) => Deno.test({ name, ignore, fn });

function bwrapSandbox(): Promise<Sandbox> {
  if (!HAVE_BWRAP) throw new Error("bubblewrap (bwrap) is not installed: apt-get install bubblewrap");
  return openSandbox({ kind: "bwrap", unsafeNoSandbox: false, tempDir: TEMP });
}

/** The host's shared memory (tmpfs pages among them), in bytes. */
function hostShmem(): number {
  const line = Deno.readTextFileSync("/proc/meminfo").split("\n").find((l) => l.startsWith("Shmem:"));
  assert.ok(line !== undefined, "no Shmem line in /proc/meminfo");
  return Number(line.split(/\s+/)[1]) * 1024;
}

/**
 * Python that tries to write `cap` bytes (files of `limit` bytes) into every directory of the jail it
 * can find (a walk of the whole tree, /proc aside, plus places a program would try first), prints how
 * many bytes each place took, then sleeps so the host can read its shared memory meanwhile.
 */
function fillProgram(limit: number, cap: number): string {
  return `
import json, os, time
LIMIT, CAP, BLOCK = ${limit}, ${cap}, b"x" * (1 << 20)
places = ["/", "/tmp", "/dev/shm", os.environ["HOME"], "/var", "/run", "/etc", "/home", "/dev",
          "/dev/pts", "/dev/mqueue", "/var/tmp", "/usr", "/usr/local", "/root", "/mnt", "/opt", "/srv"]
for top, dirs, _ in os.walk("/"):
    if top == "/proc":
        dirs[:] = []
    else:
        places.append(top)

def fill(place):
    total = 0
    for i in range(CAP // LIMIT):
        try:
            fd = os.open(os.path.join(place, ".fill%d" % i), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            return total
        try:
            while os.fstat(fd).st_size < LIMIT:
                total += os.write(fd, BLOCK[: LIMIT - os.fstat(fd).st_size])
        except OSError:
            return total
        finally:
            os.close(fd)
    return total

written = {place: fill(place) for place in dict.fromkeys(places)}
print(json.dumps({place: n for place, n in written.items() if n > 0}), flush=True)
time.sleep(1.5)
`;
}

test("a run can write only its three sized mounts, and host shared memory grows by at most 3 × the file limit", async () => {
  const sandbox = await bwrapSandbox();
  const limit = 8 * 1024 ** 2;
  const bound = 3 * limit;
  const before = hostShmem();
  let peak = before;
  const sampler = setInterval(() => peak = Math.max(peak, hostShmem()), 20);
  const result = await sandbox.run({
    language: "python",
    code: fillProgram(limit, 4 * limit),
    limits: { maxFileBytes: limit, timeoutMs: 60_000 },
  });
  clearInterval(sampler);
  assert.equal(result.status, "ok", result.stderr);
  const written: Record<string, number> = JSON.parse(result.stdout);
  // Each sized mount takes exactly its size; every other place (/, /home, /etc, /dev...) takes nothing.
  assert.deepEqual(written, { [SANDBOX_HOME]: limit, "/tmp": limit, "/dev/shm": limit });
  // What the host pays: the bound, plus 4 MiB for tmpfs bookkeeping and other processes' noise.
  const grew = peak - before;
  assert.ok(grew <= bound + 4 * 1024 ** 2, `host shared memory grew by ${grew} bytes; the bound is ${bound}`);
});
