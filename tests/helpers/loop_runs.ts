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
import { denoRunArgs, exists, ROOT } from "./commands.ts";
import { makeTinyModel } from "./tiny_model.ts";

/** `deno task loop --config CONFIG --loop.run_dir=RUN …` (its task's flags: `denoRunArgs`), not started. */
export function loopCommand(
  config: string,
  runDir: string,
  extra: string[] = [],
  stderr: "piped" | "null" = "piped",
): Deno.Command {
  return new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs("stages/loop.ts"), "--config", config, `--loop.run_dir=${runDir}`, ...extra],
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
      args: [...denoRunArgs(`stages/${name}.ts`), "--config", config, ...args],
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

/** What a test changes in `tinyLoopConfig`'s config. */
export interface TinyLoopExtra {
  /** Lines added to these sections (YAML, indented by two spaces). */
  rollout?: string;
  mask?: string;
  train?: string;
  loop?: string;
  /** `score.rewards` as a YAML flow mapping (default `{ format: 0.0 }`). */
  rewards?: string;
  rewardModule?: string;
  /** `loop.steps` (default 3). */
  steps?: number;
}

/**
 * A temporary directory with a loop config on a tiny model: 3 steps of 2 tasks × 4 samples, an ASCII reward
 * module (or `rewardModule`), a checkpoint every step, LoRA r 4; `extra` changes what its fields name.
 */
export async function tinyLoopConfig(
  prefix: string,
  extra: TinyLoopExtra = {},
): Promise<{ dir: string; config: string }> {
  const dir = await Deno.makeTempDir({ prefix });
  const config = join(dir, "config.yaml");
  await Deno.writeTextFile(
    config,
    `model:
  path: ${await makeTinyModel()}
data:
  arithmetic: { num_tasks: 24 }
rollout:
  group_size: 4
  tasks_per_step: 2
  max_batch: 8
  generation: { max_new_tokens: 8, max_total_tokens: 512, enable_thinking: false }
${extra.rollout ?? ""}score:
  rewards: ${extra.rewards ?? "{ format: 0.0 }"}
  modules: [${extra.rewardModule ?? join(ROOT, "tests/fixtures/ascii_reward.ts")}]
  module_weights: [1.0]
${extra.mask ? `mask:\n${extra.mask}` : ""}train:
  lora: { r: 4, alpha: 8 }
  optimizer: { lr: 0.01 }
${extra.train ?? ""}loop:
  steps: ${extra.steps ?? 3}
  eval_every: 0
  save_every: 1
${extra.loop ?? ""}eval:
  num_tasks: 4
`,
  );
  return { dir, config };
}

/**
 * An uninterrupted loop in `dir/a`, and one in `dir/b` killed while it writes `step-0002/<killFile>` and then
 * resumed; both must exit 0. Returns the two run directories.
 */
export async function wholeAndResumed(
  config: string,
  dir: string,
  killFile: string,
): Promise<[string, string]> {
  const [a, b] = [join(dir, "a"), join(dir, "b")];
  const whole = await loop(config, a);
  assert.equal(whole.code, 0, whole.stderr);
  await killDuringStep2(config, b, killFile);
  const resumed = await loop(config, b, ["--resume"]);
  assert.equal(resumed.code, 0, resumed.stderr);
  return [a, b];
}
