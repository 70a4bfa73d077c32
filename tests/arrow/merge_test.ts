/**
 * Rollout shards meeting at one trainer: two shards of a step (`--shard 0/2`, `1/2`) scored and masked
 * as one give the unsharded step's batch, episode by episode; files from different policies or
 * configurations are refused naming both files and the field; `--in` repeats or globs for score,
 * mask and train only.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { mergeStageFiles, readStageFiles } from "../../lib/arrow/merge.ts";
import { StageFile } from "../../lib/arrow/stage_file.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import type { Config } from "../../lib/config/schema.ts";
import type { Task } from "../../lib/data/task.ts";
import { UserError } from "../../lib/errors.ts";
import { expandPaths } from "../../lib/fs/glob.ts";
import type { PolicySequence, SequenceOptions } from "../../lib/engine/policy.ts";
import type { ChatTokenizer } from "../../lib/model/chat.ts";
import { type Shard, stepGroupIds, tasksForStep } from "../../lib/rollout/tasks.ts";
import { prepareStage } from "../../lib/cli/cli.ts";
import { mask, openSession, rollout, score, writeStageOutput } from "../../lib/pipeline/mod.ts";
import { ScriptedPolicy } from "../helpers/scripted_policy.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const STEP = 3;
const TASKS: Task[] = Array.from({ length: 4 }, (_, i) => ({
  id: `t${i}`,
  source: "arithmetic",
  prompt: `Compute ${i} + ${i}.`,
  answer: String(2 * i),
}));

/** Answers right or wrong by the episode's seed, so groups have reward variance whatever the order. */
class SeededScript extends ScriptedPolicy {
  readonly #tokenizer: ChatTokenizer;
  constructor(tokenizer: ChatTokenizer) {
    super(tokenizer, () => "");
    this.#tokenizer = tokenizer;
  }
  override openSequence(prompt: readonly number[], options?: SequenceOptions): Promise<PolicySequence> {
    const right = (options?.seed ?? 0) % 2 === 0;
    const task = TASKS.find((t) => this.#tokenizer.decode([...prompt]).includes(t.prompt))!;
    return new ScriptedPolicy(this.#tokenizer, () => `Final answer: ${right ? task.answer : "-1"}`)
      .openSequence(prompt);
  }
}

async function testConfig(extra: Array<[string, string]> = []): Promise<{ config: Config; hash: string }> {
  const { config, hash } = await loadConfig({
    overrides: [
      ["rollout.group_size", "4"],
      ["rollout.tasks_per_step", "4"],
      ["rollout.tools.enabled", "[]"],
      ["rollout.generation.max_new_tokens", "16"],
      ...extra,
    ],
  });
  return { config, hash };
}

/** Writes the rollouts of `shard` (or the whole step) of `step` to `path`. */
async function writeRollouts(path: string, shard?: Shard, extra: Array<[string, string]> = [], step = STEP) {
  const { config, hash } = await testConfig(extra);
  const session = sessionOn(config, hash, await makeTinyModel());
  const policy = new SeededScript(await session.tokenizer());
  const tasks = tasksForStep(TASKS, step, config.rollout.tasks_per_step, shard);
  const out = await rollout(session, tasks, {
    step,
    policy,
    groupIds: stepGroupIds(tasks.length, shard),
  });
  await writeStageOutput(path, out);
}

/** A session of `config` on the model at `modelDir`, with no system prompt. */
function sessionOn(config: Config, hash: string, modelDir: string) {
  return openSession(
    {
      ...config,
      model: { ...config.model, path: modelDir },
      data: { ...config.data, system_prompt: null },
    },
    hash,
    { showProgress: false },
  );
}

async function scoredAndMasked(rollouts: StageFile): Promise<StageFile> {
  const { config, hash } = await testConfig();
  const tools = { ...config.rollout.tools, sandbox: "none" as const, unsafe_no_sandbox: true };
  const session = openSession({ ...config, rollout: { ...config.rollout, tools } }, hash);
  const batch = mask(session, await score(session, rollouts));
  const path = join(await Deno.makeTempDir({ prefix: "shards-batch-" }), "batch.arrow");
  await writeStageOutput(path, batch);
  return await readStageFile(path, "batch");
}

/** Per episode id: group, tokens, reward, loss mask and advantages. */
function byEpisode(batch: StageFile): Map<string, unknown[]> {
  const ids = batch.column("episode_id") as string[];
  const rewards = batch.column("reward") as number[];
  const groups = batch.column("group_id") as number[];
  const list = (name: string, i: number) => Array.from(batch.listAt(name, i));
  return new Map(ids.map((id, i) => [id, [
    groups[i],
    rewards[i],
    list("tokens", i),
    list("loss_mask", i),
    list("advantages", i),
  ]]));
}

async function shardFiles(dir: string): Promise<{ whole: string; a: string; b: string }> {
  const files = {
    whole: join(dir, "whole.arrow"),
    a: join(dir, "rollouts-0.arrow"),
    b: join(dir, "rollouts-1.arrow"),
  };
  await writeRollouts(files.whole);
  await writeRollouts(files.a, { index: 0, count: 2 });
  await writeRollouts(files.b, { index: 1, count: 2 });
  return files;
}

Deno.test("two rollout shards scored and masked as one give the unsharded batch, per episode id", async () => {
  const dir = await Deno.makeTempDir({ prefix: "shards-" });
  const { whole, a, b } = await shardFiles(dir);
  const merged = await readStageFiles([a, b], "rollouts");
  assert.equal(merged.rows, 16);
  const [parts, all] = [
    byEpisode(await scoredAndMasked(merged)),
    byEpisode(await scoredAndMasked(await readStageFile(whole, "rollouts"))),
  ];
  const rewards = [...all.values()].map((row) => row[1]);
  assert.ok(new Set(rewards).size > 1, "the fixture must give the groups reward variance");
  assert.ok(
    [...all.values()].some((row) => (row[4] as number[]).some((x) => x !== 0)),
    "non-zero advantages",
  );
  assert.equal(parts.size, all.size);
  for (const [id, row] of all) assert.deepEqual(parts.get(id), row, id);
});

Deno.test("shards are concatenated in argument order and the merged file lists both hashes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "shards-order-" });
  const { a, b } = await shardFiles(dir);
  const [fa, fb] = [await readStageFile(a, "rollouts"), await readStageFile(b, "rollouts")];
  const ab = mergeStageFiles([fa, fb]), ba = mergeStageFiles([fb, fa]);
  const ids = (f: StageFile) => f.column("episode_id") as string[];
  assert.deepEqual(ids(ab), [...ids(fa), ...ids(fb)]);
  assert.deepEqual(ids(ba), [...ids(fb), ...ids(fa)]);
  assert.equal(ab.sha256, `${fa.sha256},${fb.sha256}`);
  assert.equal(mergeStageFiles([fa]), fa);
});

Deno.test("shards of another policy version or configuration are refused naming both files and the field", async () => {
  const dir = await Deno.makeTempDir({ prefix: "shards-mismatch-" });
  const a = join(dir, "a.arrow"), b = join(dir, "b.arrow");
  await writeRollouts(a, { index: 0, count: 2 });
  await writeRollouts(b, { index: 1, count: 2 }, [["rollout.generation.temperature", "0.5"]]);
  await assert.rejects(readStageFiles([a, b], "rollouts"), (e: Error) => {
    assert.ok(e instanceof UserError);
    assert.match(e.message, /merging .*a\.arrow and .*b\.arrow: they differ in metadata config_hash/);
    assert.doesNotMatch(e.message, /\n/);
    return true;
  });
  const fa = await readStageFile(a, "rollouts");
  const relabelled = new StageFile("c.arrow", fa.kind, fa.table, {
    ...fa.metadata,
    adapter: "lora:0123456789abcdef",
  }, fa.sha256);
  assert.throws(
    () => mergeStageFiles([fa, relabelled]),
    /a\.arrow and c\.arrow: they differ in metadata adapter/,
  );
});

Deno.test("a shard written twice, or the same shard of two steps, is refused: they share episodes or groups", async () => {
  const dir = await Deno.makeTempDir({ prefix: "shards-shared-" });
  const [a, again, later] = ["a.arrow", "a-again.arrow", "a-later.arrow"].map((f) => join(dir, f));
  await writeRollouts(a, { index: 0, count: 2 });
  await writeRollouts(again, { index: 0, count: 2 }); // the same rows, another created_at
  await writeRollouts(later, { index: 0, count: 2 }, [], STEP + 1);
  await assert.rejects(
    readStageFiles([a, again], "rollouts"),
    /a\.arrow and .*a-again\.arrow \(got "episode_id /,
  );
  await assert.rejects(
    readStageFiles([a, later], "rollouts"),
    /a\.arrow and .*a-later\.arrow \(got "group_id /,
  );
});

Deno.test("--in globs expand in name order; a glob matching nothing and a wildcard directory are refused", async () => {
  const dir = await Deno.makeTempDir({ prefix: "shards-glob-" });
  for (const name of ["r-1.arrow", "r-0.arrow", "r-0.arrow.manifest.json", "x.arrow"]) {
    await Deno.writeTextFile(join(dir, name), "");
  }
  // A shard linked in from elsewhere is matched like a file; a dangling link is not.
  const elsewhere = await Deno.makeTempDir({ prefix: "shards-elsewhere-" });
  await Deno.writeTextFile(join(elsewhere, "r-2.arrow"), "");
  await Deno.symlink(join(elsewhere, "r-2.arrow"), join(dir, "r-2.arrow"));
  await Deno.symlink(join(elsewhere, "gone.arrow"), join(dir, "r-3.arrow"));
  assert.deepEqual(await expandPaths("--in", [join(dir, "r-*.arrow"), join(dir, "x.arrow")]), [
    join(dir, "r-0.arrow"),
    join(dir, "r-1.arrow"),
    join(dir, "r-2.arrow"),
    join(dir, "x.arrow"),
  ]);
  await assert.rejects(expandPaths("--in", [join(dir, "s-*.arrow")]), /no file matches it/);
  await assert.rejects(
    expandPaths("--in", [join(dir, "*", "a.arrow")]),
    /only the file name may hold wildcards/,
  );
});

Deno.test("a stage that reads one file refuses --in twice", async () => {
  const spec = { name: "one", summary: "", needsInput: true, run: () => Promise.resolve() };
  await assert.rejects(prepareStage(spec, ["--in", "a.arrow", "--in", "b.arrow"]), (e: Error) => {
    assert.ok(e instanceof UserError);
    assert.match(e.message, /--in .*this stage reads one input file/);
    return true;
  });
});

Deno.test("deno task score per shard, then deno task mask --in GLOB: one batch of both shards", async () => {
  const dir = await Deno.makeTempDir({ prefix: "shards-cli-" });
  const { a, b } = await shardFiles(dir);
  await stage("score", ["--in", a, "--out", join(dir, "scored-0.arrow")]);
  await stage("score", ["--in", b, "--out", join(dir, "scored-1.arrow")]);
  await stage("mask", ["--in", join(dir, "scored-*.arrow"), "--out", join(dir, "batch.arrow")]);
  const batch = await readStageFile(join(dir, "batch.arrow"), "batch");
  const [fa, fb] = [await readStageFile(a, "rollouts"), await readStageFile(b, "rollouts")];
  assert.deepEqual(batch.column("episode_id"), [...fa.column("episode_id"), ...fb.column("episode_id")]);
  assert.equal(batch.metadata.input_hashes?.rollouts, `${fa.sha256},${fb.sha256}`);
});

async function stage(name: string, args: string[]): Promise<void> {
  const result = await new Deno.Command("deno", {
    args: ["task", "-q", name, ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  }).output();
  assert.equal(result.code, 0, new TextDecoder().decode(result.stderr));
}
