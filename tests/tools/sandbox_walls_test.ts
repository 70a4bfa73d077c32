/**
 * The walls of the sandbox that the adversarial tests in sandbox_test.ts do not reach: the writable
 * space of a run is the three sized tmpfs mounts and nothing else (measured as the host's shared memory
 * while a program fills every place it can write); as root, a Deno the sandbox user cannot read runs
 * from a root-owned cached copy, and a cache directory another user could have made is refused; a bwrap
 * that cannot read a file it binds says so.
 * Without bubblewrap these tests are skipped locally and fail in CI (`CI` set).
 */
import assert from "node:assert/strict";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import { openSandbox, type Sandbox, SandboxUnavailableError } from "../../lib/tools/sandbox.ts";
import { cachedBinary, reachableByAnyone } from "../../lib/tools/sandbox_binary.ts";
import { findExecutable, SANDBOX_HOME } from "../../lib/tools/sandbox_command.ts";

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

async function sha256(path: string): Promise<string> {
  return await sha256Hex(await Deno.readFile(path));
}

/**
 * Python that tries to write `cap` bytes (files of `limit` bytes) into every directory of the jail it
 * can find (a walk of the whole tree, /proc aside, plus places a program would try first), and as much
 * into memory files (memfd) and System V shared memory, which live in no mount; prints how many bytes
 * each place took, then sleeps so the host can read its shared memory meanwhile.
 */
function fillProgram(limit: number, cap: number): string {
  return `
import ctypes, json, os, time
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

held = []  # memfd descriptors, kept open (and their memory with them) until the program ends

def fill_memfds():
    total = 0
    try:
        for _ in range(CAP // LIMIT):
            held.append(os.memfd_create("fill"))
            while os.fstat(held[-1]).st_size < LIMIT:
                total += os.write(held[-1], BLOCK)
    except OSError:
        pass
    return total

def fill_sysv_shm():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    total = 0
    for _ in range(CAP // LIMIT):
        segment = libc.shmget(0, LIMIT, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
        if segment < 0:
            break
        address = libc.shmat(segment, None, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            break
        ctypes.memset(address, 1, LIMIT)
        libc.shmdt(ctypes.c_void_p(address))  # detached, the segment stays
        total += LIMIT
    return total

written = {place: fill(place) for place in dict.fromkeys(places)}
written["memfd"] = fill_memfds()
written["sysv-shm"] = fill_sysv_shm()
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
  // Each sized mount takes exactly its size; every other place (/, /home, /etc, /dev..., memfd and
  // System V shared memory) takes nothing.
  assert.deepEqual(written, { [SANDBOX_HOME]: limit, "/tmp": limit, "/dev/shm": limit });
  // What the host pays: the bound, plus 4 MiB for tmpfs bookkeeping and other processes' noise.
  const grew = peak - before;
  assert.ok(grew <= bound + 4 * 1024 ** 2, `host shared memory grew by ${grew} bytes; the bound is ${bound}`);
});

test("io_uring_setup, io_uring_enter and io_uring_register fail with ENOSYS inside the jail (as Docker's default seccomp profile refuses them)", async () => {
  const sandbox = await bwrapSandbox();
  // Without the filter: setup gives a descriptor, enter and register on descriptor -1 give EBADF.
  const code = `
import ctypes, json
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
calls = {"io_uring_setup": (425, 1, params), "io_uring_enter": (426, -1, 0, 0, 0, None, 0),
         "io_uring_register": (427, -1, 0, None, 0)}
out = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    result = libc.syscall(*args)
    out[name] = [result, ctypes.get_errno()]
print(json.dumps(out))
`;
  const result = await sandbox.run({ language: "python", code });
  assert.equal(result.status, "ok", result.stderr);
  const ENOSYS = 38;
  assert.deepEqual(JSON.parse(result.stdout), {
    io_uring_setup: [-1, ENOSYS],
    io_uring_enter: [-1, ENOSYS],
    io_uring_register: [-1, ENOSYS],
  });
});

const IS_ROOT = Deno.uid() === 0;
/** The binary cache and the drop to `nobody` happen only as root (as in CI). */
const rootTest = (name: string, fn: () => Promise<void>) =>
  Deno.test({ name, ignore: ignore || !IS_ROOT, fn });

/** A private directory (mode 700, as /root is) holding a copy of `source`. */
async function privateCopy(source: string, name: string): Promise<string> {
  const dir = await Deno.makeTempDir({ dir: TEMP, prefix: "private-" });
  await Deno.chmod(dir, 0o700);
  await Deno.copyFile(source, `${dir}/${name}`);
  await Deno.chmod(`${dir}/${name}`, 0o755);
  return `${dir}/${name}`;
}

rootTest(
  "as root, a run reaches a Deno the sandbox user cannot read, through a root-owned cached copy",
  async () => {
    const deno = await privateCopy(Deno.execPath(), "deno");
    assert.equal(await reachableByAnyone(deno), false);
    const cache = `${TEMP}/deno-cache`;
    const code = [
      `import { openSandbox } from ${JSON.stringify(import.meta.resolve("../../lib/tools/sandbox.ts"))};`,
      "const sandbox = await openSandbox({ kind: 'bwrap', unsafeNoSandbox: false, javascript: 'deno',",
      `  tempDir: ${JSON.stringify(TEMP)}, binaryCacheDir: ${JSON.stringify(cache)} });`,
      "const result = await sandbox.run({ language: 'javascript', code: 'console.log(typeof Deno, 6 * 7)' });",
      "console.log(JSON.stringify([result.status, result.stdout]));",
    ].join("\n");
    const child = await new Deno.Command(deno, { args: ["eval", code], stdout: "piped", stderr: "piped" })
      .output();
    const err = new TextDecoder().decode(child.stderr);
    assert.equal(child.code, 0, err);
    assert.deepEqual(JSON.parse(new TextDecoder().decode(child.stdout)), ["ok", "object 42\n"]);
    const copies = [...Deno.readDirSync(cache)].map((e) => e.name);
    assert.deepEqual(copies, [`deno-${await sha256(deno)}`]);
    const info = Deno.statSync(`${cache}/${copies[0]}`);
    assert.deepEqual([info.uid, (info.mode ?? 0) & 0o7777], [0, 0o755]);
    assert.deepEqual([Deno.statSync(cache).uid, (Deno.statSync(cache).mode ?? 0) & 0o7777], [0, 0o755]);
  },
);

rootTest("the binary cache reuses an intact copy by sha256 and makes it again when altered", async () => {
  const source = await privateCopy("/bin/true", "tool");
  const cache = `${TEMP}/cache-reuse`;
  const path = await cachedBinary(source, cache);
  assert.equal(path, `${cache}/tool-${await sha256(source)}`);
  assert.equal(await reachableByAnyone(path), true);
  const first = Deno.statSync(path);
  assert.deepEqual([first.uid, (first.mode ?? 0) & 0o7777], [0, 0o755]);
  assert.equal(await cachedBinary(source, cache), path);
  assert.equal(Deno.statSync(path).ino, first.ino, "an intact copy is reused");
  // Altered content, or a copy others could write: made again (a new file renamed over the old one).
  for (
    const alter of [
      () => Deno.writeFileSync(path, new Uint8Array([1, 2, 3])),
      () => Deno.chmodSync(path, 0o777),
    ]
  ) {
    const before = Deno.statSync(path).ino;
    alter();
    assert.equal(await cachedBinary(source, cache), path);
    const after = Deno.statSync(path);
    assert.notEqual(after.ino, before);
    assert.deepEqual([(after.mode ?? 0) & 0o7777, await sha256(path)], [0o755, await sha256(source)]);
  }
  // A new source is a new name; the old copy stays for processes still using it; no temp file is left.
  Deno.writeFileSync(source, new Uint8Array([0]), { append: true });
  const next = await cachedBinary(source, cache);
  assert.equal(next, `${cache}/tool-${await sha256(source)}`);
  assert.deepEqual(
    [...Deno.readDirSync(cache)].map((e) => e.name).sort(),
    [path, next].map((p) => p.slice(cache.length + 1)).sort(),
  );
});

rootTest(
  "a binary cache directory another user made or could write, or under such a parent, is refused",
  async () => {
    const source = await privateCopy("/bin/true", "tool");
    const made = (name: string, mode: number, uid = 0) => {
      Deno.mkdirSync(`${TEMP}/${name}`);
      Deno.chmodSync(`${TEMP}/${name}`, mode);
      Deno.chownSync(`${TEMP}/${name}`, uid, uid);
      return `${TEMP}/${name}`;
    };
    Deno.symlinkSync(made("cache-real", 0o755), `${TEMP}/cache-link`);
    const refused: [string, RegExp][] = [
      [made("cache-theirs", 0o755, 65534), /cache-theirs: it is not a directory owned by root/],
      [
        made("cache-open", 0o777),
        /cache-open: it is not a directory owned by root and closed to other users/,
      ],
      [`${TEMP}/cache-link`, /cache-link: it is not a directory owned by root/],
      [
        `${made("open-parent", 0o777)}/cache`,
        /open-parent is not a root-owned directory closed to other users/,
      ],
      [`${made("their-parent", 0o755, 65534)}/cache`, /their-parent is not a root-owned directory/],
    ];
    for (const [dir, message] of refused) {
      await assert.rejects(
        () => cachedBinary(source, dir),
        (e) => e instanceof SandboxUnavailableError && message.test(e.message),
        dir,
      );
    }
    for (const name of ["cache-theirs", "cache-open", "cache-real", "open-parent", "their-parent"]) {
      assert.deepEqual([...Deno.readDirSync(`${TEMP}/${name}`)], [], `${name}: something was written`);
    }
    // A sticky world-writable parent (like /tmp) is fine: other users cannot rename or remove root's entries.
    const path = await cachedBinary(source, `${made("sticky", 0o1777)}/cache`);
    assert.equal(await sha256(path), await sha256(source));
  },
);

rootTest(
  "when bwrap cannot read a file it binds, the error names that file, not user namespaces",
  async () => {
    const closed = await Deno.makeTempDir({ dir: TEMP, prefix: "closed-" });
    await Deno.chmod(closed, 0o700);
    await assert.rejects(
      () => openSandbox({ kind: "bwrap", unsafeNoSandbox: false, tempDir: closed }),
      (e) => {
        assert.ok(e instanceof SandboxUnavailableError);
        assert.match(
          e.message,
          new RegExp(`the sandbox user cannot read ${closed}/sandbox-\\w+/main\\.(py|js)`),
        );
        assert.doesNotMatch(e.message, /user namespaces/);
        return true;
      },
    );
  },
);
