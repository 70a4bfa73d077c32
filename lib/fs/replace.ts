/**
 * Replacing a complete output by a new one so that a kill at any instant leaves one complete output:
 * the old output is renamed aside (`.NAME.old-TAG`), the new one renamed in, then the old one deleted.
 * Between the two renames the complete old output lives under its aside name; `recoverReplacement`
 * (run by the output check before the next write, and by stages before they read an input) renames it
 * back, or deletes it once the new output is complete.
 *
 * A stage file is a pair (data file, `FILE.manifest.json`). Its replacement moves the old manifest
 * aside first, then the old data, then renames the new data in and the new manifest last, so a data
 * file with a manifest beside it is always a complete, matching pair.
 *
 * Tests kill the process at each step through `DENO_RL_CRASH_AT` (see `crashPoint`); nothing else
 * reads that variable.
 *
 * @module
 */

import { basename, dirname, join } from "node:path";
import { pathExists as exists } from "./read.ts";

const MANIFEST = ".manifest.json";

/** The aside name of `path` for a replacement tagged `tag`. */
function asideOf(path: string, tag: string): string {
  return join(dirname(path), `.${basename(path)}.old-${tag}`);
}

/** A tag unique to this process and call. */
export function replacementTag(): string {
  return `${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
}

/** Replaces (or creates) the directory `dir` with the complete directory `tmp` (a sibling). */
export async function replaceDir(tmp: string, dir: string): Promise<void> {
  const aside = asideOf(dir, replacementTag());
  const moved = await renameIfExists(dir, aside);
  crashPoint("dir-aside");
  await Deno.rename(tmp, dir);
  crashPoint("dir-renamed");
  if (moved) await Deno.remove(aside, { recursive: true });
}

/**
 * Replaces (or creates) the stage file `path` and its manifest with `tmpData` and `tmpManifest`
 * (complete, synced files in the same directory).
 */
export async function replaceFileWithManifest(
  path: string,
  tmpData: string,
  tmpManifest: string,
): Promise<void> {
  const aside = asideOf(path, replacementTag());
  const movedManifest = await renameIfExists(path + MANIFEST, aside + MANIFEST);
  crashPoint("file-manifest-aside");
  const movedData = await renameIfExists(path, aside);
  crashPoint("file-data-aside");
  await Deno.rename(tmpData, path);
  crashPoint("file-data-renamed");
  await Deno.rename(tmpManifest, path + MANIFEST);
  crashPoint("file-manifest-renamed");
  if (movedData) await Deno.remove(aside);
  if (movedManifest) await Deno.remove(aside + MANIFEST);
}

/**
 * Finishes or undoes a replacement of `path` that was killed: when `path` is complete (for a stage
 * file: data and manifest both present) the asides are deleted; otherwise the newest complete aside
 * is renamed back. Does nothing when no aside exists.
 */
export async function recoverReplacement(path: string, withManifest: boolean): Promise<void> {
  const asides = await asidesOf(path);
  if (asides.length === 0) return;
  const complete = await exists(path) && (!withManifest || await exists(path + MANIFEST));
  if (!complete) await restore(path, asides[0], withManifest);
  for (const aside of complete ? asides : asides.slice(1)) await removeAside(aside, withManifest);
}

/** Renames the aside back; for a stage file whose manifest was not yet moved aside, keeps it. */
async function restore(path: string, aside: string, withManifest: boolean): Promise<void> {
  if (!withManifest) {
    await Deno.rename(aside, path);
    return;
  }
  const dataAside = await exists(aside);
  const manifestAside = await exists(aside + MANIFEST);
  if (!dataAside) {
    // Killed after moving the manifest aside but before the data: the old data is still at `path`.
    if (manifestAside) await Deno.rename(aside + MANIFEST, path + MANIFEST);
    return;
  }
  if (!manifestAside) {
    // The old manifest never moved; it describes the aside data only if the path holds no data.
    if (await exists(path)) return;
    await Deno.rename(aside, path);
    return;
  }
  await Deno.rename(aside, path);
  await Deno.rename(aside + MANIFEST, path + MANIFEST);
}

/** Aside copies of `path`, newest first (by modification time). */
async function asidesOf(path: string): Promise<string[]> {
  const prefix = `.${basename(path)}.old-`;
  const found: Array<{ path: string; mtime: number }> = [];
  try {
    for await (const entry of Deno.readDir(dirname(path))) {
      if (!entry.name.startsWith(prefix) || entry.name.endsWith(MANIFEST)) continue;
      const full = join(dirname(path), entry.name);
      found.push({ path: full, mtime: (await Deno.lstat(full)).mtime?.getTime() ?? 0 });
    }
    // A manifest moved aside whose data is still at `path` has no data aside: count it too.
    for await (const entry of Deno.readDir(dirname(path))) {
      if (!entry.name.startsWith(prefix) || !entry.name.endsWith(MANIFEST)) continue;
      const data = join(dirname(path), entry.name.slice(0, -MANIFEST.length));
      if (!found.some((f) => f.path === data)) found.push({ path: data, mtime: 0 });
    }
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof Deno.errors.NotADirectory) return [];
    throw e;
  }
  return found.sort((a, b) => b.mtime - a.mtime).map((f) => f.path);
}

async function removeAside(aside: string, withManifest: boolean): Promise<void> {
  await Deno.remove(aside, { recursive: true }).catch(ignoreNotFound);
  if (withManifest) await Deno.remove(aside + MANIFEST).catch(ignoreNotFound);
}

async function renameIfExists(from: string, to: string): Promise<boolean> {
  try {
    await Deno.rename(from, to);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

function ignoreNotFound(e: unknown): void {
  if (!(e instanceof Deno.errors.NotFound)) throw e;
}

/** The step at which the crash tests kill this process, read once (only with env permission). */
const CRASH_AT = (() => {
  const variable = "DENO_RL_CRASH_AT";
  try {
    if (Deno.permissions.querySync({ name: "env", variable }).state !== "granted") return undefined;
    return Deno.env.get(variable);
  } catch {
    return undefined;
  }
})();

/** Kills this process with SIGKILL when `DENO_RL_CRASH_AT` names `step` (crash tests only). */
export function crashPoint(step: string): void {
  if (CRASH_AT === step) Deno.kill(Deno.pid, "SIGKILL");
}
