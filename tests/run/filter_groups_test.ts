/**
 * DAPO's dynamic sampling (`loop.filter_groups`, lib/run/filter_groups.ts and sample_step.ts) in loops run
 * as a user runs them, on a tiny model with a reward that is the same in every episode of half the tasks
 * (tests/fixtures/odd_tasks_flat_reward.ts): every group that trains has rewards that differ and the step
 * fills to `rollout.tasks_per_step` groups; a cap reached short of that trains on fewer groups, logs it and
 * records it in metrics.arrow; a run killed during a step's second generation batch and resumed writes the
 * same files as an uninterrupted one. Which tasks a step draws (drawOrder) and which groups it keeps
 * (groupsWithSpread, rowsOfGroups): unit-tested here.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { groupsOf, stdOf } from "../../lib/advantages/groups.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import { StageFile } from "../../lib/arrow/stage_file.ts";
import type { StageKind } from "../../lib/arrow/kinds.ts";
import type { Task } from "../../lib/data/task.ts";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import { drawOrder, genBatch, groupsWithSpread, rowsOfGroups } from "../../lib/run/filter_groups.ts";
import { tableFromArrays } from "apache-arrow";
import { tasksForStep } from "../../lib/rollout/tasks.ts";
import { exists, ROOT } from "../helpers/commands.ts";
import { fileHash, loop, tinyLoopConfig, wholeAndResumed } from "../helpers/loop_runs.ts";
import { isFlatTask } from "../fixtures/odd_tasks_flat_reward.ts";

const STEPS = ["step-0001", "step-0002", "step-0003"];

/** A 3-step loop config of 2 tasks × 4 episodes per step with dynamic sampling capped at `cap` batches. */
function filteredConfig(prefix: string, cap: number) {
  return tinyLoopConfig(prefix, {
    rewardModule: join(ROOT, "tests/fixtures/odd_tasks_flat_reward.ts"),
    loop: `  filter_groups: { enable: true, metric: reward, max_num_gen_batches: ${cap} }\n`,
  });
}

/** The reward std of each group of a stage file, by group id. */
function groupStds(file: StageFile): Map<number, number> {
  const ids = file.vector("group_id").toArray() as Int32Array;
  const reward = file.vector("reward").toArray() as Float32Array;
  const groups = groupsOf(ids);
  const out = new Map<number, number>();
  for (let k = 0; k < groups.count; k++) {
    const members = groups.members.subarray(groups.start[k], groups.start[k + 1]);
    out.set(ids[members[0]], stdOf(reward, members));
  }
  return out;
}

/** The run's metrics.arrow rows. */
async function runRows(run: string): Promise<Record<string, number>[]> {
  const file = await readStageFile(join(run, "metrics.arrow"), "run_metrics");
  return file.table.toArray().map((r) => r.toJSON() as Record<string, number>);
}

/** The task ids of a stage file's episodes, once each, in order. */
function taskIds(file: StageFile): string[] {
  return [...new Set(file.column("task_id") as string[])];
}

Deno.test("loop.filter_groups: every trained group's rewards vary and each step fills to tasks_per_step groups", async () => {
  const { dir, config } = await filteredConfig("filter-fill-", 4);
  const run = join(dir, "run");
  const out = await loop(config, run);
  assert.equal(out.code, 0, out.stderr);
  const rows = await runRows(run);
  let dropped = 0;
  for (const [s, step] of STEPS.entries()) {
    const batch = await readStageFile(join(run, step, "batch.arrow"), "batch");
    const stds = groupStds(batch);
    assert.equal(stds.size, 2, `${step}: the batch holds tasks_per_step groups`);
    for (const [group, std] of stds) assert.ok(std > 0, `${step}: group ${group} has reward std ${std}`);
    assert.ok(taskIds(batch).every((id) => !isFlatTask(id)), `${step}: no flat task trains`);
    const drawn = await readStageFile(join(run, step, "gen-01", "scored.arrow"), "scored");
    dropped += [...groupStds(drawn).values()].filter((std) => std === 0).length;
    const row = rows[s];
    assert.equal(row.filter_groups_kept, 2);
    assert.equal(row.filter_groups_wanted, 2);
    assert.equal(row.filter_cap_hit, 0);
    assert.ok(row.filter_gen_batches >= 1 && row.filter_groups_drawn >= 2);
    assert.match(
      out.stderr,
      new RegExp(`step ${s + 1}: filter_groups kept 2/2 groups from ${row.filter_gen_batches} generation`),
    );
  }
  assert.ok(dropped > 0, "some drawn group had equal rewards (else nothing was filtered)");
  assert.ok(rows.some((r) => r.filter_gen_batches > 1), "some step sampled an extra batch");
});

Deno.test("loop.filter_groups: reaching max_num_gen_batches trains on the groups kept, logs it and records it", async () => {
  const { dir, config } = await filteredConfig("filter-cap-", 1);
  const run = join(dir, "run");
  const out = await loop(config, run);
  assert.equal(out.code, 0, out.stderr);
  const rows = await runRows(run);
  let capped = 0;
  for (const [s, step] of STEPS.entries()) {
    const drawn = await readStageFile(join(run, step, "gen-01", "scored.arrow"), "scored");
    const varying = taskIds(drawn).filter((id) => !isFlatTask(id)).length;
    const batch = await readStageFile(join(run, step, "batch.arrow"), "batch");
    assert.equal(groupStds(batch).size, varying, `${step}: trains the groups kept`);
    assert.ok(!(await exists(join(run, step, "gen-02"))), `${step}: one generation batch at most`);
    assert.equal(rows[s].filter_groups_kept, varying);
    assert.equal(rows[s].filter_gen_batches, 1);
    if (varying === 2) continue;
    capped++;
    assert.equal(rows[s].filter_cap_hit, 1, `${step}: the cap is recorded`);
    assert.ok(
      out.stderr.includes(
        `step ${s + 1}: filter_groups kept ${varying}/2 groups from 1 generation batches (2 groups drawn, ` +
          `${2 - varying} with equal reward dropped); cap hit (loop.filter_groups.max_num_gen_batches 1): ` +
          `training on ${varying} groups`,
      ),
      out.stderr,
    );
    const trained = await readStageFile(join(run, step, "metrics.arrow"), "metrics");
    assert.ok(trained.rows > 0, `${step}: the kept groups trained`);
  }
  assert.ok(capped > 0, "some step reached the cap (else this test checks nothing)");
});

/**
 * A stage file's metadata and the sha256 of each column's values, which must repeat exactly. Not compared:
 * `created_at` (wall time), `input_hashes` (hashes of files that hold their own `created_at`) and
 * `config_hash` (the two runs differ in loop.run_dir, which is part of the resolved config).
 */
async function content(path: string, kind: StageKind): Promise<Record<string, string>> {
  const file = await readStageFile(path, kind);
  const { created_at: _c, input_hashes: _i, config_hash: _h, ...metadata } = file.metadata;
  const out: Record<string, string> = { metadata: JSON.stringify(metadata) };
  for (const c of file.columnNames.filter((c) => !WALL_TIME.has(c))) {
    out[c] = await sha256Hex(new TextEncoder().encode(JSON.stringify(Array.from(file.vector(c), String))));
  }
  return out;
}

/** Columns holding wall time (a tool call's `ms`), which no rerun repeats. */
const WALL_TIME = new Set(["tool_calls"]);

Deno.test("loop.filter_groups: a run killed in step 2's second generation batch and resumed writes an uninterrupted run's files", async () => {
  const { dir, config } = await filteredConfig("filter-resume-", 4);
  const [a, b] = await wholeAndResumed(config, dir, join("gen-02", "rollouts.arrow.manifest.json"));
  let compared = 0;
  for (const step of STEPS) {
    for (const gen of ["gen-01", "gen-02", "gen-03", "gen-04"]) {
      if (!(await exists(join(a, step, gen)))) continue;
      for (const kind of ["rollouts", "scored"] as const) {
        const path = join(step, gen, `${kind}.arrow`);
        assert.deepEqual(await content(join(b, path), kind), await content(join(a, path), kind), path);
        compared++;
      }
    }
    for (const kind of ["rollouts", "scored", "batch"] as const) {
      const path = join(step, `${kind}.arrow`);
      assert.deepEqual(await content(join(b, path), kind), await content(join(a, path), kind), path);
    }
    for (const file of ["adapter_model.safetensors", "optimizer.safetensors"]) {
      const path = join("adapters", step, file);
      assert.equal(await fileHash(join(b, path)), await fileHash(join(a, path)), path);
    }
  }
  assert.ok(compared > 6, "some step sampled more than one generation batch");
  const [ra, rb] = [await runRows(a), await runRows(b)];
  const filtered = (rows: Record<string, number>[]) =>
    rows.map((r) => Object.entries(r).filter(([k]) => k.startsWith("filter_") || k === "reward_mean"));
  assert.deepEqual(filtered(rb), filtered(ra));
});

Deno.test("drawOrder: a step's own tasks first, then the rest of the split once each, seeded by step and seed", () => {
  const train: Task[] = Array.from(
    { length: 10 },
    (_, i) => ({ id: `t${i}`, source: "arithmetic", prompt: "p", answer: "a" }),
  );
  const order = drawOrder(train, 3, 2, 7);
  assert.deepEqual(order.slice(0, 2), tasksForStep(train, 3, 2));
  assert.equal(new Set(order).size, train.length, "every task once");
  assert.deepEqual(drawOrder(train, 3, 2, 7), order, "the same counters give the same order");
  assert.notDeepEqual(drawOrder(train, 3, 2, 8).slice(2), order.slice(2), "the seed shuffles the rest");
  assert.notDeepEqual(
    drawOrder(train, 4, 2, 7).slice(2),
    drawOrder(train, 3, 2, 7).slice(2),
    "so does the step",
  );
  assert.deepEqual(genBatch(order, 2, 2), { tasks: order.slice(2, 4), groupIds: [2, 3] });
  assert.deepEqual(genBatch(order, 5, 2).groupIds, [8, 9]);
});

Deno.test("groupsWithSpread keeps groups whose metric differs (reward or correct); rowsOfGroups cuts out their rows", () => {
  const table = tableFromArrays({
    group_id: Int32Array.from([4, 4, 7, 7, 9, 9, 2]),
    reward: Float32Array.from([0.5, 0.5, 0.1, 0.9, 1, 1, 0.3]),
    correct: [true, false, false, false, true, true, false],
  });
  const file = new StageFile("(test)", "scored", table, { kind: "scored", format_version: 1 }, "");
  assert.deepEqual(groupsWithSpread(file, "reward"), { ids: [7], groups: 4 });
  assert.deepEqual(groupsWithSpread(file, "correct"), { ids: [4], groups: 4 });
  const kept = rowsOfGroups(file, new Set([4, 9]));
  assert.deepEqual(Array.from(kept.getChild("group_id")!.toArray()), [4, 4, 9, 9]);
  assert.deepEqual(Array.from(kept.getChild("reward")!.toArray()), [0.5, 0.5, 1, 1]);
});
