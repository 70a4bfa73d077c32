/**
 * Bad arguments that used to crash, hang, or be silently ignored or clamped, each now one line and exit 2
 * before any work (run from a fresh working directory: no `runs/` appears, so the default model was not
 * built): `--step` / `--shard` garbage, flags a stage does not read, `rollout.tasks_per_step` above the
 * training tasks, a FIFO given as an input or config file (never opened), and `eval.num_tasks`: 0 means
 * no held-out split, refused by every command that evaluates. docs/outputs.md, lib/rollout/tasks.ts.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { writeStageFile } from "../../lib/arrow/mod.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { generateArithmeticTasks } from "../../lib/data/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { checkLoopTasks } from "../../lib/run/run_dir_check.ts";
import { splitHeldOut, tasksForStep } from "../../lib/rollout/tasks.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { assertRefused, type CommandResult, exists, stage } from "../helpers/commands.ts";

async function fresh(): Promise<string> {
  return await Deno.makeTempDir({ prefix: "arg-checks-" });
}

/** Runs `name` in a fresh directory; asserts the one-line refusal and that nothing was made there. */
async function refusedFresh(name: string, args: string[], pattern: RegExp): Promise<CommandResult> {
  const dir = await fresh();
  const r = await stage(name, args, { cwd: dir, timeoutMs: 60_000 });
  assertRefused(r, pattern, `${name} ${args.join(" ")}`);
  const made = [];
  for await (const e of Deno.readDir(dir)) made.push(e.name);
  assert.deepEqual(made, [], `${name} ${args.join(" ")} wrote ${made.join(", ")}`);
  return r;
}

Deno.test("rollout --step and --shard garbage: one line naming the flag, exit 2, before any work", async () => {
  const out = ["--out", "x.arrow"];
  await refusedFresh("rollout", [...out, "--step", "-1"], /--step \(got "-1"\): it must be a whole number/);
  await refusedFresh("rollout", [...out, "--step", "abc"], /--step \(got "abc"\)/);
  await refusedFresh("rollout", [...out, "--step", "1.5"], /--step/);
  await refusedFresh("rollout", [...out, "--shard", "x"], /--shard \(got "x"\): it must be i\/n/);
  await refusedFresh("rollout", [...out, "--shard", "3/2"], /--shard/);
  await refusedFresh("rollout", [...out, "--shard", "5/8", "--rollout.tasks_per_step=4"], /would get none/);
});

Deno.test("a flag the stage does not read (--in for rollout, eval, report; --out for the loop) is refused by name", async () => {
  const dir = await fresh();
  const batch = join(dir, "batch.arrow");
  await writeStageFile(batch, "batch", sampleColumns("batch", 2), SAMPLE_META);
  // --print-config: the command line is parsed, nothing else runs.
  for (const name of ["rollout", "eval"]) {
    assertRefused(await stage(name, ["--in", batch, "--print-config"]), /unknown flag --in/, name);
  }
  assertRefused(await stage("report", [dir, "--in", batch, "--print-config"]), /unknown flag --in/);
  assertRefused(await stage("loop", ["--out", dir, "--print-config"]), /unknown flag --out/);
  const help = await stage("rollout", ["--help"]);
  assert.doesNotMatch(help.stdout, /--in FILE/);
  assert.match(help.stdout, /--out PATH/);
});

Deno.test("rollout.tasks_per_step above the training tasks is refused with the number available, not clamped", async () => {
  await refusedFresh(
    "rollout",
    ["--out", "x.arrow", "--rollout.tasks_per_step=1000000", "--rollout.group_size=2"],
    /tasks_per_step \(got 1000000\): the training split has only 136 tasks.*--rollout\.tasks_per_step=136/,
  );
  const tasks = generateArithmeticTasks({
    numTasks: 10,
    seed: 1,
    minOperands: 2,
    maxOperands: 2,
    maxValue: 9,
  });
  assert.throws(
    () => tasksForStep(tasks, 0, 11),
    (e) => e instanceof UserError && /only 10 tasks/.test(e.message),
  );
  assert.equal(tasksForStep(tasks, 3, 10).length, 10);
});

Deno.test("a FIFO as --in or --config is named a FIFO and refused without being opened", async () => {
  const dir = await fresh();
  const fifo = join(dir, "pipe");
  assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
  const out = ["--out", join(dir, "x.arrow")];
  assertRefused(await stage("score", ["--in", fifo, ...out], { timeoutMs: 30_000 }), /FIFO \(named pipe\)/);
  assertRefused(await stage("mask", ["--config", fifo, "--in", fifo, ...out], { timeoutMs: 30_000 }), /FIFO/);
});

Deno.test("eval.num_tasks 0 is no held-out split: rollout trains on every task, eval and an evaluating loop refuse", async () => {
  const tasks = generateArithmeticTasks({
    numTasks: 6,
    seed: 1,
    minOperands: 2,
    maxOperands: 2,
    maxValue: 9,
  });
  assert.deepEqual(splitHeldOut(tasks, 0), { train: tasks, heldOut: [] });
  const printed = await stage("rollout", ["--eval.num_tasks=0", "--print-config"]);
  assert.equal(printed.code, 0, printed.stderr);
  await refusedFresh(
    "eval",
    ["--out", "e.arrow", "--eval.num_tasks=0"],
    /deno task eval evaluates on the held-out/,
  );
  await refusedFresh("loop", ["--eval.num_tasks=0"], /--loop\.eval_every=0/);
  // Too few tasks for the held-out split: the fix names --eval.num_tasks=0.
  const small = ["--out", "x.arrow", "--data.arithmetic.num_tasks=40"];
  await refusedFresh("rollout", small, /data set has 40 tasks .*--eval\.num_tasks=0/);
  const ok = async (overrides: Array<[string, string]>) =>
    await checkLoopTasks((await loadConfig({ overrides })).config);
  await ok([["eval.num_tasks", "0"], ["loop.eval_every", "0"]]);
  await assert.rejects(ok([["eval.num_tasks", "0"]]), /eval\.num_tasks \(got 0\)/);
});

Deno.test("the rollout stage still runs when every argument is right (fresh directory, default model made)", async () => {
  const dir = await fresh();
  const small = [
    "--rollout.tasks_per_step=1",
    "--rollout.group_size=2",
    "--rollout.generation.max_new_tokens=4",
  ];
  const r = await stage("rollout", ["--out", "r.arrow", "--step", "2", "--shard", "0/1", ...small], {
    cwd: dir,
  });
  assert.equal(r.code, 0, r.stderr);
  assert.ok(await exists(join(dir, "runs", "demo", "model", "config.json")));
  assert.ok(await exists(join(dir, "r.arrow")));
});
