/**
 * `deno task loop` (lib/run/loop.ts) as a user runs it, in subprocesses on a tiny model: a run killed with
 * SIGKILL mid-step and resumed ends with the same adapter and the same rollouts as an uninterrupted run;
 * a second loop on the run is refused; a resume that changes the LoRA shape is refused naming it, and one
 * with the run's own config.yaml as --config goes on; the four stage commands run by hand give the loop's
 * files, step by step; `deno task loop` whose wrapper is killed (SIGKILL) or stopped (SIGTERM, SIGINT) stops its
 * child stage and releases the run lock.
 *
 * The toy reward (tests/fixtures/ascii_reward.ts) varies within every group, so advantages and gradients
 * are non-zero and the adapter really moves between steps (a zero-advantage run would make "same adapter"
 * trivially true).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { runLoop } from "../../lib/run/loop.ts";
import { Trainer } from "../../lib/train/trainer.ts";
import { exists } from "../helpers/commands.ts";
import { fileHash, loop, stageOn, tinyLoopConfig, wholeAndResumed } from "../helpers/loop_runs.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

function setup(): Promise<{ dir: string; config: string }> {
  return tinyLoopConfig("loop-test-");
}

/** The columns that must repeat exactly (tool-call timings, `ms`, are wall time and may not). */
async function trajectory(path: string) {
  const f = await readStageFile(path, "rollouts");
  return ["tokens", "sampled", "logprobs", "turn_idx"].map((c) => Array.from(f.listColumn(c).values))
    .concat([Array.from(f.vector("episode_id").toArray()), Array.from(f.vector("policy_version").toArray())]);
}

Deno.test("a loop killed mid-step and resumed equals an uninterrupted one (adapter hash, rollouts)", async () => {
  const { dir, config } = await setup();
  const [a, b] = await wholeAndResumed(config, dir, "rollouts.arrow.manifest.json");

  for (const step of ["step-0001", "step-0002", "step-0003"]) {
    assert.deepEqual(
      await trajectory(join(b, step, "rollouts.arrow")),
      await trajectory(join(a, step, "rollouts.arrow")),
      step,
    );
  }
  const adapter = (run: string) => fileHash(join(run, "adapters", "step-0003", "adapter_model.safetensors"));
  const optimizer = (run: string) => fileHash(join(run, "adapters", "step-0003", "optimizer.safetensors"));
  assert.equal(await adapter(b), await adapter(a));
  assert.equal(await optimizer(b), await optimizer(a));
  assert.notEqual(
    await fileHash(join(a, "adapters", "step-0002", "adapter_model.safetensors")),
    await adapter(a),
    "the adapter moved in step 3",
  );
  const rows = await readStageFile(join(b, "metrics.arrow"), "run_metrics");
  assert.deepEqual(Array.from(rows.table.getChild("step")!.toArray() as Int32Array), [1, 2, 3]);
});

Deno.test("a second loop on a run is refused; a resume changing the LoRA rank is refused naming it; the run's config.yaml resumes it", async () => {
  const { dir, config } = await setup();
  const run = join(dir, "run");
  assert.equal((await loop(config, run, ["--loop.steps=1"])).code, 0);
  await Deno.writeTextFile(join(run, "lock"), `${Deno.pid}\n`); // held by a live process: this one
  const locked = await loop(config, run, ["--resume", "--loop.steps=2"]);
  assert.equal(locked.code, 2);
  assert.match(locked.stderr, new RegExp(`run locked by pid ${Deno.pid}`));
  assert.equal((await Deno.readTextFile(join(run, "latest"))).trim(), "step-0001", "nothing ran");
  await Deno.remove(join(run, "lock"));

  const changed = await loop(config, run, ["--resume", "--loop.steps=2", "--train.lora.r=8"]);
  assert.equal(changed.code, 2);
  assert.match(changed.stderr, /train\.lora/);
  assert.equal(changed.stderr.trim().split("\n").length, 1, changed.stderr);
  const harmless = await loop(config, run, ["--resume", "--loop.steps=2"]);
  assert.equal(harmless.code, 0, harmless.stderr);
  assert.equal((await Deno.readTextFile(join(run, "latest"))).trim(), "step-0002");
  // The run's own snapshot (the resolved config plus its identity section) is a valid --config.
  const own = await loop(join(run, "config.yaml"), run, ["--resume", "--loop.steps=3"]);
  assert.equal(own.code, 0, own.stderr);
  assert.equal((await Deno.readTextFile(join(run, "latest"))).trim(), "step-0003");
});

/** `deno task loop` as a user starts it: the task wrapper, which runs the stage as its child. */
function denoTaskLoop(config: string, runDir: string, env: Record<string, string> = {}) {
  return new Deno.Command(Deno.execPath(), {
    args: ["task", "loop", "--config", config, `--loop.run_dir=${runDir}`, "--loop.steps=1000"],
    cwd: ROOT,
    stdout: "null",
    stderr: "piped",
    env: { NO_COLOR: "1", ...env },
  }).spawn();
}

/** What npx (`npm exec`) puts in the environment of the `deno task` it starts (measured with npm 11). */
const NPX_ENV = {
  npm_command: "exec",
  npm_lifecycle_event: "npx",
  npm_config_user_agent: "npm/11.19.1 node/v20.20.2 linux x64 workspaces/false",
};

/** Whether process `pid` exists (`kill -0`). */
function isRunning(pid: number): boolean {
  return new Deno.Command("kill", { args: ["-0", String(pid)], stderr: "null" }).outputSync().success;
}

/** Waits (bounded: 60 s) for the stage process to exit; returns whether it did. */
async function exited(pid: number): Promise<boolean> {
  for (let i = 0; i < 600 && isRunning(pid); i++) await new Promise((r) => setTimeout(r, 100));
  return !isRunning(pid);
}

const SAYS = {
  SIGKILL: /loop: stopped: its parent process .* is gone/,
  SIGTERM: /loop: stopped by SIGTERM/,
  SIGINT: /loop: interrupted/,
};

for (
  const [signal, how] of [
    ["SIGKILL", ""],
    ["SIGTERM", ""],
    ["SIGINT", ""],
    ["SIGKILL", " (started through npx)"],
  ] as const
) {
  Deno.test(`deno task loop${how}: ${signal} of the wrapper stops the loop and releases its lock`, async () => {
    const { dir, config } = await setup();
    const run = join(dir, "run");
    const wrapper = denoTaskLoop(config, run, how ? NPX_ENV : {});
    const stderr = new Response(wrapper.stderr).text(); // the stage shares this pipe with its wrapper
    const latest = join(run, "latest");
    for (let i = 0; i < 1200 && !(await exists(latest)); i++) await new Promise((r) => setTimeout(r, 50));
    const stage = Number((await Deno.readTextFile(join(run, "lock"))).trim());
    assert.notEqual(stage, wrapper.pid, "the lock names the stage process, the wrapper's child");
    wrapper.kill(signal);
    await wrapper.status;
    const stopped = await exited(stage);
    if (!stopped) Deno.kill(stage, "SIGKILL"); // do not leave it running after a failure
    assert.ok(stopped, `the loop (pid ${stage}) kept running after ${signal} of its wrapper`);
    const said = await stderr;
    assert.match(said, SAYS[signal]);
    assert.equal(await exists(join(run, "lock")), false, "the run lock is released");
    const again = await loop(config, run, ["--resume", "--loop.steps=1"]);
    assert.equal(again.code, 0, again.stderr);
  });
}

Deno.test("a 3-step loop builds the train graph once and equals the stage commands run by hand, step by step", async () => {
  const { dir, config } = await setup();
  const run = join(dir, "run");
  const { config: resolved, hash } = await loadConfig({ file: config, overrides: [["loop.run_dir", run]] });
  const before = Trainer.created;
  const result = await runLoop(resolved, hash, { resume: false, showProgress: false });
  assert.equal(result.step, 3);
  assert.equal(Trainer.created - before, 1, "one train graph and session for the whole run");

  const hand = join(dir, "hand");
  const stage = stageOn(config);
  for (let step = 1; step <= 3; step++) {
    const at = (f: string) => join(hand, `step-${step}`, f);
    await Deno.mkdir(join(hand, `step-${step}`), { recursive: true });
    const adapter = step > 1 ? [`--adapter=${join(hand, `step-${step - 1}`, "adapter")}`] : [];
    await stage("rollout", ["--step", String(step), "--out", at("rollouts.arrow"), ...adapter]);
    await stage("score", ["--in", at("rollouts.arrow"), "--out", at("scored.arrow")]);
    await stage("mask", ["--in", at("scored.arrow"), "--out", at("batch.arrow")]);
    await stage("train", ["--in", at("batch.arrow"), "--out", at("adapter"), ...adapter]);
    const loopStep = join(run, `step-000${step}`);
    assert.deepEqual(
      await trajectory(at("rollouts.arrow")),
      await trajectory(join(loopStep, "rollouts.arrow")),
    );
    for (const [file, column] of [["scored", "reward"], ["batch", "advantages"]] as const) {
      const [x, y] = [
        await readStageFile(at(`${file}.arrow`), file),
        await readStageFile(join(loopStep, `${file}.arrow`), file),
      ];
      const values = (f: typeof x) =>
        column === "reward" ? f.vector(column).toArray() : f.listColumn(column).values;
      assert.deepEqual(Array.from(values(x)), Array.from(values(y)), `step ${step} ${column}`);
    }
    for (const f of ["adapter_model.safetensors", "optimizer.safetensors"]) {
      assert.equal(
        await fileHash(at(`adapter/${f}`)),
        await fileHash(join(run, "adapters", `step-000${step}`, f)),
        `step ${step} ${f}`,
      );
    }
  }
});
