/**
 * What a command must not write, each case as a user met it on a fresh clone (a fresh working directory,
 * where `model.path` runs/demo/model does not exist yet): every refusal is one line and exit 2 before any
 * work — before the default model is built (no `runs/` appears) and with the disk unchanged (tree hashes)
 * — and a missing parent directory is created instead of crashing after the work. docs/outputs.md.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFiles } from "../../lib/arrow/merge.ts";
import { writeStageFile } from "../../lib/arrow/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { checkOutputPath, HTML_MARKER, writeOutputMarker } from "../../lib/fs/output.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { checkRunDir } from "../../lib/run/run_dir_check.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { makeRunDir } from "../fixtures/run_dir.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { assertRefused, command, exists, readOnlyDir, stage, treeHash } from "../helpers/commands.ts";

/** Settings that keep a rollout, eval or loop to seconds on the default tiny model. */
const SMALL = [
  "--rollout.tasks_per_step=1",
  "--rollout.group_size=2",
  "--rollout.generation.max_new_tokens=4",
  "--eval.num_tasks=2",
];

/** A fresh working directory holding a scored and a batch file. */
async function workspace() {
  const dir = await Deno.makeTempDir({ prefix: "output-cases-" });
  const scored = join(dir, "scored.arrow");
  const batch = join(dir, "batch.arrow");
  await writeStageFile(scored, "scored", sampleColumns("scored", 2), SAMPLE_META);
  await writeStageFile(batch, "batch", sampleColumns("batch", 2), SAMPLE_META);
  return { dir, scored, batch };
}

/** A run directory of ours (a `deno task loop` run: marker without a maker, and `latest`). */
async function loopRun(dir: string): Promise<string> {
  await Deno.mkdir(dir, { recursive: true });
  await writeOutputMarker(dir, "run-dir");
  await Deno.writeTextFile(join(dir, "latest"), "step-0001\n");
  return dir;
}

Deno.test("report: a report.html it did not write, /, home and a folder that is not a run are refused; the fix names the run below", async () => {
  const run = await makeRunDir({ steps: 1 });
  const runs = join(run, "..");
  const home = await Deno.makeTempDir({ prefix: "home-" });
  await Deno.writeTextFile(join(run, "report.html"), "<p>my notes</p>");
  const before = await treeHash(join(runs, ".."));
  const env = { HOME: home };
  assertRefused(await stage("report", [run], { env }), /report\.html: .*a file this toolkit did not write/);
  assertRefused(await stage("report", ["/"], { env }), /run directory \/: it holds no run files/);
  assertRefused(await stage("report", [home], { env }), /it holds no run files/);
  assertRefused(await stage("report", [runs], { env }), new RegExp(`pass a run directory below it: ${run}`));
  assert.equal(await treeHash(join(runs, "..")), before);
  assert.ok(!(await exists(join(home, "report.html"))));
  // Its own report is refreshed; an explicit --out of ours is replaced only with --overwrite.
  await Deno.remove(join(run, "report.html"));
  for (let i = 0; i < 2; i++) assert.equal((await stage("report", [run], { env })).code, 0);
  assert.match(await Deno.readTextFile(join(run, "report.html")), new RegExp(HTML_MARKER));
  const out = join(home, "r.html");
  assert.equal((await stage("report", [run, "--out", out], { env })).code, 0);
  assertRefused(await stage("report", [run, "--out", out], { env }), /pass --overwrite/);
  assert.equal((await stage("report", [run, "--out", out, "--overwrite"], { env })).code, 0);
});

Deno.test("loop --overwrite refuses a run a live loop holds; a stale lock (dead pid) may be replaced", async () => {
  const { dir } = await workspace();
  const run = await loopRun(join(dir, "runs", "earlier"));
  const holder = new Deno.Command("sleep", { args: ["60"] }).spawn();
  try {
    await Deno.writeTextFile(join(run, "lock"), `${holder.pid}\n`);
    const before = await treeHash(run);
    const r = await stage("loop", ["--overwrite", `--loop.run_dir=${run}`, "--loop.steps=1", ...SMALL], {
      cwd: dir,
    });
    assertRefused(r, new RegExp(`run locked by pid ${holder.pid}.*replacing it would delete`));
    assert.equal(await treeHash(run), before);
    assert.ok(!(await exists(join(dir, "runs", "demo"))), "the default model was built before the refusal");
  } finally {
    holder.kill();
    await holder.status;
  }
  const { config } = await loadConfig({ overrides: [["loop.run_dir", run]] });
  const check = { resume: false, overwrite: true, flag: "loop.run_dir", inputs: [] };
  assert.equal(await checkRunDir(config, check), "ours"); // the holder is gone: the lock is stale
});

Deno.test("demo: an earlier loop run at loop.run_dir is refused without --overwrite; an earlier demo's passes; nothing is deleted before every check", async () => {
  const { dir } = await workspace();
  const run = await loopRun(join(dir, "earlier"));
  const before = await treeHash(dir);
  // Too few tasks for eval.num_tasks: the last check the demo makes, so nothing may be gone by then.
  const args = [`--loop.run_dir=${run}`, "--data.arithmetic.num_tasks=10", "--eval.num_tasks=20"];
  assertRefused(await stage("demo", args, { cwd: dir }), /loop\.run_dir .*earlier run.*pass --overwrite/);
  assertRefused(await stage("demo", [...args, "--overwrite"], { cwd: dir }), /eval\.num_tasks/);
  assert.equal(await treeHash(dir), before);
  await writeOutputMarker(run, "run-dir", "demo");
  assertRefused(await stage("demo", args, { cwd: dir }), /eval\.num_tasks \(got 20\)/);
  assert.ok(await exists(join(run, "latest")));
});

Deno.test("on a fresh clone every refusal comes before the default model is built", async () => {
  const { dir } = await workspace();
  const cases: Array<[string, string[], RegExp]> = [
    ["rollout", ["--out", "."], /current directory/],
    ["rollout", ["--out", "/dev/null"], /character device/],
    ["rollout", ["--out", "x.arrow", "--step", "-1"], /--step/],
    ["rollout", ["--out", "x.arrow", "--data.arithmetic.num_tasks=10"], /eval\.num_tasks/],
    ["eval", ["--out", "runs/demo/model/eval.arrow"], /inside an input/],
    ["loop", ["--loop.run_dir=runs/demo"], /holds an input of this command \(runs\/demo\/model\)/],
  ];
  for (const [name, args, pattern] of cases) {
    assertRefused(await stage(name, args, { cwd: dir }), pattern, `${name} ${args.join(" ")}`);
    assert.ok(!(await exists(join(dir, "runs"))), `${name} ${args.join(" ")} created runs/`);
  }
});

Deno.test("the same file twice as --in (the same path, or a copy with the same bytes) is refused", async () => {
  const { dir, scored, batch } = await workspace();
  const copy = join(dir, "copy.arrow");
  await Deno.copyFile(scored, copy);
  await Deno.copyFile(`${scored}.manifest.json`, `${copy}.manifest.json`);
  const out = ["--out", join(dir, "out.arrow")];
  assertRefused(await stage("mask", ["--in", scored, "--in", scored, ...out]), /same file .*same path/);
  assertRefused(await stage("mask", ["--in", scored, "--in", copy, ...out]), /same file .*same bytes/);
  assertRefused(await stage("train", ["--in", batch, "--in", batch, ...out]), /read twice/);
  assert.ok(!(await exists(join(dir, "out.arrow"))));
  await assert.rejects(readStageFiles([scored, copy], "scored"), (e) => e instanceof UserError);
});

Deno.test("an --out equal to, inside or holding an input is refused: model, adapter, data.path, read_file_root", async () => {
  const { dir, batch } = await workspace();
  const model = await makeTinyModel({ vocab: 512, tokenizer: false, seed: 3 });
  const adapter = join(dir, "adapter");
  await Deno.mkdir(adapter);
  await Deno.writeTextFile(join(adapter, "adapter_config.json"), "{}");
  const tasks = join(dir, "tasks.jsonl");
  await Deno.writeTextFile(tasks, '{"prompt": "1+1", "answer": "2"}\n');
  const docs = join(dir, "docs");
  await Deno.mkdir(docs);
  const before = await treeHash(dir);
  const m = `--model.path=${model}`;
  const cases: Array<[string, string[], RegExp]> = [
    ["rollout", [m, "--out", join(model, "x.arrow"), ...SMALL], /inside an input .*model/],
    ["train", ["--in", batch, m, "--adapter", adapter, "--out", join(adapter, "next")], /inside an input/],
    ["rollout", [m, "--data.source=jsonl", `--data.path=${tasks}`, "--out", tasks], /is an input/],
    [
      "rollout",
      [m, "--rollout.tools.enabled=[read_file]", `--rollout.tools.read_file_root=${docs}`, ...SMALL],
      /inside an input .*docs/,
    ],
  ];
  cases[3][1].push("--out", join(docs, "rollouts.arrow"));
  for (const [name, args, pattern] of cases) {
    assertRefused(await stage(name, args, { cwd: dir }), pattern, `${name} ${args.join(" ")}`);
  }
  assert.equal(await treeHash(dir), before);
});

Deno.test("missing parent directories of --out are created after the checks: score, mask, report, rollout, eval", async () => {
  const { dir, scored } = await workspace();
  const rollouts = join(dir, "made", "by", "rollout", "rollouts.arrow");
  const runs: Array<[string, string[], string]> = [
    ["rollout", ["--out", rollouts, ...SMALL], rollouts],
    [
      "score",
      ["--in", rollouts, "--out", join(dir, "a", "b", "scored.arrow")],
      join(dir, "a", "b", "scored.arrow"),
    ],
    [
      "mask",
      ["--in", scored, "--out", join(dir, "c", "d", "batch.arrow")],
      join(dir, "c", "d", "batch.arrow"),
    ],
    ["eval", ["--out", join(dir, "e", "f", "eval.arrow"), ...SMALL], join(dir, "e", "f", "eval.arrow")],
    ["report", [await makeRunDir({ steps: 1 }), "--out", join(dir, "g", "r.html")], join(dir, "g", "r.html")],
  ];
  for (const [name, args, out] of runs) {
    const r = await stage(name, args, { cwd: dir });
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    assert.ok(await exists(out), `${name} wrote no ${out}`);
  }
});

Deno.test("a device, a FIFO or a socket as --out is refused naming what it is", async () => {
  const { dir } = await workspace();
  const fifo = join(dir, "fifo");
  assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
  const socketPath = join(dir, "socket");
  const listener = Deno.listen({ transport: "unix", path: socketPath });
  try {
    const spec = { kind: "stage-file", fileKind: "batch" } as const;
    const cases: Array<[string, RegExp]> = [
      ["/dev/null", /character device/],
      [fifo, /FIFO/],
      [socketPath, /socket/],
    ];
    for (const [path, pattern] of cases) {
      await assert.rejects(checkOutputPath(path, spec, { overwrite: true }), (e) => {
        assert.ok(e instanceof UserError);
        assert.match(e.message, pattern);
        return true;
      });
    }
  } finally {
    listener.close();
  }
  assertRefused(await command("scripts/make_model.ts", ["--out", "/dev/null"]), /character device/);
});

const readOnly = await (async () => {
  const dir = await Deno.makeTempDir({ prefix: "ro-probe-" });
  return (await readOnlyDir(dir)) !== null;
})();

Deno.test({
  name: "a read-only output directory is refused before work, also for an existing output and for root",
  ignore: !readOnly, // neither chmod (not root) nor a read-only bind mount (root) is possible here
  fn: async () => {
    const { dir, scored } = await workspace();
    const ro = join(dir, "ro");
    await Deno.mkdir(ro);
    await writeStageFile(join(ro, "batch.arrow"), "batch", sampleColumns("batch", 2), SAMPLE_META);
    const before = await treeHash(ro);
    const prefix = (await readOnlyDir(ro))!;
    for (const out of ["batch.arrow", "new.arrow"]) {
      const r = await stage("mask", ["--in", scored, "--out", join(ro, out), "--overwrite"], { prefix });
      assertRefused(r, /is not writable/, out);
      assert.doesNotMatch(r.stdout, /mask: /, "the mask ran before the refusal");
    }
    await Deno.chmod(ro, 0o755);
    assert.equal(await treeHash(ro), before);
  },
});
