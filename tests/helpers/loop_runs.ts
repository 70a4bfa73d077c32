/**
 * Loop runs as a user starts them, for the resume and by-hand tests: `stages/loop.ts` (and the stage
 * commands) in child processes on a test's own config file, a loop killed while it writes a file of step 2,
 * and the file hashes the tests compare.
 *
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import { exists, ROOT } from "./commands.ts";

/** `deno run -A stages/loop.ts --config CONFIG --loop.run_dir=RUN …`, not started. */
export function loopCommand(
  config: string,
  runDir: string,
  extra: string[] = [],
  stderr: "piped" | "null" = "piped",
): Deno.Command {
  return new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "stages/loop.ts", "--config", config, `--loop.run_dir=${runDir}`, ...extra],
    cwd: ROOT,
    stdout: "piped",
    stderr,
    env: { NO_COLOR: "1" },
  });
}

/** Runs the loop to its end; its exit code and stderr. */
export async function loop(config: string, runDir: string, extra: string[] = []) {
  const out = await loopCommand(config, runDir, extra).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

/**
 * Starts the loop and kills it (SIGKILL) as soon as `step-0002/<file>` exists: a loop that dies in the
 * middle of step 2, its last complete step 1.
 */
export async function killDuringStep2(config: string, runDir: string, file: string): Promise<void> {
  const child = loopCommand(config, runDir, [], "null").spawn();
  const marker = join(runDir, "step-0002", file);
  for (let i = 0; i < 600 && !(await exists(marker)); i++) await new Promise((r) => setTimeout(r, 50));
  child.kill("SIGKILL");
  await child.status;
  await child.stdout.cancel().catch(() => {});
  assert.equal((await Deno.readTextFile(join(runDir, "latest"))).trim(), "step-0001", "killed during step 2");
}

/** A stage command on `config` that must succeed: `(name, args) => …`. */
export function stageOn(config: string) {
  return async (name: string, args: string[]) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `stages/${name}.ts`, "--config", config, ...args],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
      env: { NO_COLOR: "1" },
    }).output();
    assert.equal(out.code, 0, `${name}: ${new TextDecoder().decode(out.stderr)}`);
  };
}

/** sha256 of a file's bytes. */
export async function fileHash(path: string): Promise<string> {
  return await sha256Hex(await Deno.readFile(path));
}
