/**
 * data/README.md's generator command, run as written (its permission flags included), writes the file and
 * leaves no temporary file beside it.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

Deno.test("data/README.md's make_arithmetic command runs as written and leaves no temporary file", async () => {
  const readme = await Deno.readTextFile(join(ROOT, "data/README.md"));
  const line = readme.split("\n").find((l) => l.startsWith("deno run ") && l.includes("make_arithmetic.ts"));
  assert.ok(line, "no make_arithmetic command in data/README.md");
  const dir = await Deno.makeTempDir({ prefix: "make-arithmetic-" });
  const out = join(dir, "arithmetic.jsonl");
  const args = line.split(/\s+/).slice(1).map((a) => a === "data/arithmetic.jsonl" ? out : a);
  assert.ok(args.includes(out), `the command writes no data/arithmetic.jsonl: ${line}`);
  const r = await new Deno.Command(Deno.execPath(), { args, cwd: ROOT, stdout: "piped", stderr: "piped" })
    .output();
  assert.equal(r.code, 0, new TextDecoder().decode(r.stderr));
  assert.equal((await Deno.readTextFile(out)).trim().split("\n").length, 200);
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["arithmetic.jsonl"]);
});

Deno.test("make_arithmetic: an --out that is a directory, a device, a loop, too long or in no directory is one line, exit 2, nothing written", async () => {
  const dir = await Deno.makeTempDir({ prefix: "make-arithmetic-bad-" });
  await Deno.mkdir(join(dir, "x.jsonl"));
  await Deno.symlink(join(dir, "loop-b"), join(dir, "loop-a"));
  await Deno.symlink(join(dir, "loop-a"), join(dir, "loop-b"));
  const cases: Array<[string, RegExp]> = [
    [join(dir, "x.jsonl"), /it is a directory, not a file/],
    ["/dev/full", /may not touch it/],
    [join(dir, "loop-a"), /symbolic link loop/],
    [join(dir, "n".repeat(300)), /longer than/],
    [join(dir, "missing", "x.jsonl"), /its directory .*missing does not exist/],
  ];
  for (const [out, why] of cases) {
    const r = await new Deno.Command(Deno.execPath(), {
      // The README's permission flags: /dev needs --allow-all, which the command does not have.
      args: ["run", "--allow-read", "--allow-write", "data/make_arithmetic.ts", "--n", "3", "--out", out],
      cwd: ROOT,
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(r.stderr);
    assert.equal(r.code, 2, `${out}: ${err}`);
    assert.match(err, why, out);
    assert.equal(err.trim().split("\n").length, 1, `${out}: one line, no stack trace: ${err}`);
  }
  assert.deepEqual(
    [...Deno.readDirSync(dir)].map((e) => e.name).sort(),
    ["loop-a", "loop-b", "x.jsonl"],
    "no temporary file",
  );
});
