/**
 * Makes an interpreter binary reachable by the sandbox user. When the toolkit runs as root, bwrap runs
 * as `nobody` (docs/sandbox.md), which cannot bind or run a binary under a private directory: the Deno
 * that `npx -y deno@…` installs lives under /root/.npm/_npx/…, and /root is mode 700. Such a binary is
 * copied into a cache directory every user can read:
 *
 * - the directory is owned by root, mode 0755, and every directory above it is owned by root and
 *   writable by no one else (or sticky, like /tmp): no other user can have made it, written into it, or
 *   swapped it. A cache directory that fails this is refused (SandboxUnavailableError), never used.
 * - the copy is named by the sha256 of its content (`deno-<sha256>`), written under a temporary name,
 *   made read-only for others (0755) and renamed into place, so a run never sees a half-written file and
 *   two processes making it at once both end with the same content.
 * - a copy already there is reused only when it is a root-owned regular file that no one else can write
 *   and its sha256 matches the source's; otherwise it is made again.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { basename, dirname, join } from "node:path";
import { SandboxUnavailableError } from "./sandbox_error.ts";

/** Where copies go when the sandbox user cannot reach the interpreter (a root-only parent on Debian). */
export const DEFAULT_BINARY_CACHE = "/var/cache/deno-rl";

/** Whether any user (not the owner, in no group) can reach and run `path`, a path without symlinks. */
export async function reachableByAnyone(path: string): Promise<boolean> {
  try {
    const file = await Deno.stat(path);
    if (!file.isFile || ((file.mode ?? 0) & 0o005) !== 0o005) return false;
    for (const dir of ancestors(path)) {
      if ((((await Deno.stat(dir)).mode ?? 0) & 0o001) === 0) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/** The path of a copy of `binary` that any user can run, reused or made in `cacheDir`. */
export async function cachedBinary(binary: string, cacheDir: string): Promise<string> {
  const dir = await secureCacheDir(cacheDir);
  const wanted = join(dir, `${basename(binary)}-${await sha256File(binary)}`);
  if (await isIntactCopy(wanted)) return wanted;
  const temp = await Deno.makeTempFile({ dir, prefix: `.${basename(binary)}-` });
  try {
    const digest = await copyHashing(binary, temp);
    await Deno.chmod(temp, 0o755);
    // Named by what was copied: if the source changed meanwhile, the name still matches the content.
    const made = join(dir, `${basename(binary)}-${digest}`);
    await Deno.rename(temp, made);
    return made;
  } catch (e) {
    await Deno.remove(temp).catch(() => {});
    throw e;
  }
}

/**
 * Makes `dir` if missing; refuses it unless root owns it and nobody else can write it or its parents.
 * Returns it with its parent's symlinks resolved, the path every later step uses.
 */
async function secureCacheDir(path: string): Promise<string> {
  let dir: string;
  try {
    dir = join(await Deno.realPath(dirname(path)), basename(path));
  } catch (e) {
    throw refuse(path, `its parent cannot be read (${(e as Error).message})`);
  }
  for (const above of ancestors(dir)) {
    const info = await statOrRefuse(dir, above);
    if (!info.isDirectory || info.uid !== 0 || writableByOthers(info) && !sticky(info)) {
      throw refuse(dir, `${above} is not a root-owned directory closed to other users`);
    }
  }
  try {
    await Deno.mkdir(dir, { mode: 0o755 });
    await Deno.chmod(dir, 0o755); // the umask may have taken bits away
  } catch (e) {
    if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
  }
  const info = await Deno.lstat(dir);
  if (!info.isDirectory || info.uid !== 0 || writableByOthers(info)) {
    throw refuse(
      dir,
      "it is not a directory owned by root and closed to other users (another user may have made it)",
    );
  }
  return dir;
}

/** The directories above `path`, nearest first, up to /. */
function ancestors(path: string): string[] {
  const dirs: string[] = [];
  for (let dir = dirname(path); !dirs.includes(dir); dir = dirname(dir)) dirs.push(dir);
  return dirs;
}

async function statOrRefuse(dir: string, path: string): Promise<Deno.FileInfo> {
  try {
    return await Deno.lstat(path);
  } catch (e) {
    throw refuse(dir, `${path} cannot be read (${(e as Error).message})`);
  }
}

function writableByOthers(info: Deno.FileInfo): boolean {
  return ((info.mode ?? 0o777) & 0o022) !== 0;
}

function sticky(info: Deno.FileInfo): boolean {
  return ((info.mode ?? 0) & 0o1000) !== 0;
}

function refuse(dir: string, why: string): SandboxUnavailableError {
  return new SandboxUnavailableError(`sandbox binary cache ${dir}`, {
    why,
    fix: `remove ${dir} (it is made again), or install the interpreter where every user can read it ` +
      "(e.g. /usr/local/bin)",
  });
}

/** A root-owned regular file no one else can write, whose content hashes to the sha256 in its name. */
async function isIntactCopy(path: string): Promise<boolean> {
  let info: Deno.FileInfo;
  try {
    info = await Deno.lstat(path);
  } catch {
    return false;
  }
  if (!info.isFile || info.uid !== 0 || writableByOthers(info) || ((info.mode ?? 0) & 0o005) !== 0o005) {
    return false;
  }
  return path.endsWith(`-${await sha256File(path)}`);
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  using file = await Deno.open(path, { read: true });
  const buffer = new Uint8Array(1 << 20);
  for (let n = await file.read(buffer); n !== null; n = await file.read(buffer)) {
    hash.update(buffer.subarray(0, n));
  }
  return hash.digest("hex");
}

/** Copies `from` to the existing file `to`, returning the sha256 of the bytes written. */
async function copyHashing(from: string, to: string): Promise<string> {
  const hash = createHash("sha256");
  using source = await Deno.open(from, { read: true });
  using target = await Deno.open(to, { write: true, truncate: true });
  const buffer = new Uint8Array(1 << 20);
  for (let n = await source.read(buffer); n !== null; n = await source.read(buffer)) {
    hash.update(buffer.subarray(0, n));
    for (let done = 0; done < n;) done += await target.write(buffer.subarray(done, n));
  }
  await target.sync();
  return hash.digest("hex");
}
