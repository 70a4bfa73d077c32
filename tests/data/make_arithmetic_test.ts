/**
 * data/README.md's generator command, run as written (its permission flags included), writes the file and
 * leaves no temporary file beside it.
 */

import assert from "node:assert/strict";
import { join } from "node:path";

const ROOT = new URL("../..", import.meta.url).pathname;

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
