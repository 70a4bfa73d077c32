/**
 * Telling a run directory (docs/runs.md) from any other directory, and finding the run directories below
 * one: `deno task report runs/demo` names the demo's folder, whose run is `runs/demo/run`, and is answered
 * with that path instead of an empty report.
 *
 * A run directory holds at least one run file: the output marker naming a run (written first by the
 * loop), `latest`, `metrics.arrow`, a `step-NNNN/` folder or `eval/`. A `config.yaml` alone does not
 * count (every repository root has one).
 *
 * @module
 */

import { join } from "node:path";
import { readOutputMarker } from "../fs/output.ts";
import { statOrNull } from "../fs/stat.ts";

const STEP_DIR = /^step-\d{4,}$/;

/** Whether `dir` holds a run's files (an unreadable directory does not). */
export async function isRunDir(dir: string): Promise<boolean> {
  if ((await readOutputMarker(dir)) === "run-dir") return true;
  for (const name of ["latest", "metrics.arrow", "eval"]) {
    if (await statOrNull(join(dir, name)).catch(() => null)) return true;
  }
  for (const name of await subdirectories(dir)) if (STEP_DIR.test(name)) return true;
  return false;
}

/** How many directories a search looks into at most (a search below `/` or home stays short). */
const MAX_VISITED = 400;

/**
 * Run directories below `dir` (not `dir` itself), breadth first, at most `limit`, `depth` levels down,
 * skipping hidden folders and node_modules.
 */
export async function findRunDirs(dir: string, depth = 3, limit = 5): Promise<string[]> {
  const found: string[] = [];
  let visited = 0;
  let level = [dir];
  for (let d = 0; d < depth && level.length > 0; d++) {
    const next: string[] = [];
    for (const parent of level) {
      for (const name of await subdirectories(parent)) {
        if (name.startsWith(".") || name === "node_modules") continue;
        const child = join(parent, name);
        if (await isRunDir(child)) found.push(child);
        else next.push(child);
        if (found.length >= limit || ++visited >= MAX_VISITED) return found;
      }
    }
    level = next;
  }
  return found;
}

async function subdirectories(dir: string): Promise<string[]> {
  const names: string[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) if (entry.isDirectory) names.push(entry.name);
  } catch {
    return []; // unreadable or gone: nothing to list
  }
  return names.sort();
}
