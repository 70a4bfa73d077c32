/**
 * Paths that are not a regular file or directory, given to the commands as a user runs them (with the
 * permission flags of their deno.json task, tests/helpers/commands.ts): each is refused in one line,
 * exit 2, before any work and without hanging — docs/RELIABILITY.md items 151 to 153 and 169.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { writeStageFile } from "../../lib/arrow/mod.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { assertRefused, exists, ROOT, stage, taskFlags } from "../helpers/commands.ts";

/** A refusal, not a hang: a command still reading a FIFO after this long fails the test. */
const NO_HANG = { timeoutMs: 60_000 };

Deno.test("the stages run in tests with their deno.json task's flags, never --allow-all", () => {
  for (const entry of Deno.readDirSync(join(ROOT, "stages"))) {
    const script = `stages/${entry.name}`;
    if (!Deno.readTextFileSync(join(ROOT, script)).includes("import.meta.main")) continue;
    const flags = taskFlags(script);
    assert.ok(flags !== null, `no deno.json task runs ${script}`);
    assert.ok(!flags.includes("-A") && !flags.includes("--allow-all"), `${script}: ${flags.join(" ")}`);
  }
});

Deno.test("no test starts a stage with -A: each goes through denoRunArgs, with its task's flags", async () => {
  const found: string[] = [];
  const visit = async (dir: string) => {
    for await (const entry of Deno.readDir(dir)) {
      const path = join(dir, entry.name);
      if (entry.isDirectory) await visit(path);
      else if (path.endsWith(".ts")) {
        // An argument list naming -A (or --allow-all) and a script under stages/.
        const text = await Deno.readTextFile(path);
        for (const m of text.matchAll(/\[[^\]]*"(-A|--allow-all)"[^\]]*stages\/[^\]]*\]/g)) {
          found.push(`${path.slice(ROOT.length + 1)}:${text.slice(0, m.index).split("\n").length}`);
        }
      }
    }
  };
  await visit(join(ROOT, "tests"));
  assert.deepEqual(found, [], "stages run with -A (use denoRunArgs from tests/helpers/commands.ts)");
});

Deno.test("--out under /dev, /proc or /sys, or with a name past NAME_MAX, is refused in one line", async () => {
  const dir = await Deno.makeTempDir({ prefix: "unreachable-out-" });
  const scored = join(dir, "scored.arrow");
  await writeStageFile(scored, "scored", sampleColumns("scored", 2), SAMPLE_META);
  const cases: Array<[string, RegExp]> = [
    ["/dev/null", /--out \/dev\/null: it is a character device/],
    ["/proc/self/fd/1", /--out \/proc\/self\/fd\/1: this command may not touch it/],
    ["/proc/deno-rl/batch.arrow", /may not touch it .*Fix: choose a regular file or directory outside/],
    ["/sys/deno-rl.arrow", /--out \/sys\/deno-rl\.arrow: this command may not touch it/],
    [join(dir, `${"a".repeat(300)}.arrow`), /longer than the file system allows.*Fix: choose a shorter name/],
  ];
  for (const [out, pattern] of cases) {
    assertRefused(await stage("mask", ["--in", scored, "--out", out], { cwd: dir }), pattern, out);
  }
});

Deno.test("a symbolic link loop as --adapter is refused in one line", async () => {
  const dir = await Deno.makeTempDir({ prefix: "unreachable-adapter-" });
  const batch = join(dir, "batch.arrow");
  await writeStageFile(batch, "batch", sampleColumns("batch", 2), SAMPLE_META);
  await Deno.symlink(join(dir, "b"), join(dir, "a"));
  await Deno.symlink(join(dir, "a"), join(dir, "b"));
  const r = await stage("train", ["--in", batch, "--out", join(dir, "out"), "--adapter", join(dir, "a")], {
    cwd: dir,
  });
  assertRefused(r, /adapter .*\/a: it is a symbolic link loop/);
});

Deno.test("data.path a FIFO, a link to /dev/zero, a directory or a file past the size cap: refused before work, no hang", async () => {
  const dir = await Deno.makeTempDir({ prefix: "unreachable-data-" });
  const fifo = join(dir, "fifo.jsonl");
  assert.ok((await new Deno.Command("mkfifo", { args: [fifo] }).output()).success);
  await Deno.symlink("/dev/zero", join(dir, "zero.jsonl"));
  await Deno.mkdir(join(dir, "x.jsonl"));
  // Sparse: 300 MiB long without taking the disk or the memory.
  await Deno.writeTextFile(join(dir, "big.jsonl"), "");
  await Deno.truncate(join(dir, "big.jsonl"), 300 * 2 ** 20);
  const cases: Array<[string, RegExp]> = [
    ["fifo.jsonl", /dataset file fifo\.jsonl: it is a FIFO/],
    ["zero.jsonl", /dataset file zero\.jsonl: it is a character device/],
    ["x.jsonl", /dataset file x\.jsonl: it is a directory/],
    ["big.jsonl", /dataset file big\.jsonl: it is 300 MiB, more than the 256 MiB/],
  ];
  for (const [path, pattern] of cases) {
    const args = ["--out", "r.arrow", "--data.source=gsm8k", `--data.path=${path}`];
    assertRefused(await stage("rollout", args, { cwd: dir, ...NO_HANG }), pattern, path);
    assert.ok(!(await exists(join(dir, "runs"))), `${path}: the default model was built first`);
  }
});

Deno.test("a 50 MB prompt in data.path: rollout refuses it in one line naming the task, before the model", async () => {
  const dir = await Deno.makeTempDir({ prefix: "huge-prompt-" });
  const row = JSON.stringify({ id: "huge", prompt: "x".repeat(50 * 1000 * 1000), answer: "1" });
  await Deno.writeTextFile(join(dir, "huge.jsonl"), row + "\n");
  const args = ["--out", "r.arrow", "--data.source=jsonl", "--data.path=huge.jsonl", "--data.fields.id=id"];
  const r = await stage("rollout", args, { cwd: dir, ...NO_HANG });
  assertRefused(r, /huge\.jsonl: task "huge": prompt: it is 50000000 bytes .* at most 1048576 bytes/, "huge");
  assert.ok(!(await exists(join(dir, "runs"))), "the default model was built first");
});
