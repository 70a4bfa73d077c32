/**
 * `deno task rollout` as a user runs it from the repository on the default config (the default model is
 * made when missing): the file it writes opens in readers we did not write — Rust Polars and flechette —
 * with the documented column types, and a shard pair covers the step's tasks exactly once.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { readWithFlechette, readWithPolars } from "../helpers/interop.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SMALL = [
  "--rollout.tasks_per_step=2",
  "--rollout.group_size=2",
  "--rollout.generation.max_new_tokens=16",
];

async function rolloutCommand(out: string, extra: string[] = []): Promise<void> {
  const command = new Deno.Command("deno", {
    args: ["task", "rollout", "--out", out, ...SMALL, ...extra],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  });
  const result = await command.output();
  assert.equal(result.code, 0, new TextDecoder().decode(result.stderr));
}

Deno.test("deno task rollout on the default config writes a file Polars and flechette read with our types", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rollout-stage-" });
  const out = join(dir, "rollouts.arrow");
  await rolloutCommand(out);
  const ours = await readStageFile(out, "rollouts");
  assert.equal(ours.rows, 4);
  const polars = await readWithPolars(out);
  const flechette = await readWithFlechette(out);
  const expected: Array<[string, string, string]> = [
    ["tokens", "List(Int32)", "List<Int32>"],
    ["sampled", "List(UInt8)", "List<Uint8>"],
    ["logprobs", "List(Float32)", "List<Float32>"],
    ["turn_idx", "List(Int16)", "List<Int16>"],
    ["prompt_len", "Int32", "Int32"],
    ["num_turns", "Int16", "Int16"],
    ["messages", "String", "Utf8"],
    ["policy_version", "String", "Utf8"],
  ];
  for (const [name, p, f] of expected) {
    assert.equal(polars.types[name], p, `polars ${name}`);
    assert.equal(flechette.types[name], f, `flechette ${name}`);
  }
  assert.ok(polars.types.tool_calls.startsWith("List(Struct("));
  assert.ok(flechette.types.tool_calls.startsWith("List<Struct<"));
  const tokens = ours.column("tokens").map((row) => Array.from(row as ArrayLike<number>));
  assert.deepEqual(polars.column("tokens"), tokens);
  assert.deepEqual(flechette.column("tokens"), tokens);
  assert.deepEqual(polars.column("episode_id"), ours.column("episode_id"));
});

Deno.test("rollout --shard 0/2 and 1/2 together sample exactly the unsharded step's episodes", async () => {
  const dir = await Deno.makeTempDir({ prefix: "rollout-shards-" });
  const [whole, a, b] = ["whole", "a", "b"].map((n) => join(dir, `${n}.arrow`));
  await rolloutCommand(whole, ["--step", "3"]);
  await rolloutCommand(a, ["--step", "3", "--shard", "0/2"]);
  await rolloutCommand(b, ["--step", "3", "--shard", "1/2"]);
  const byId = async (path: string) => {
    const f = await readStageFile(path, "rollouts");
    const ids = f.column("episode_id") as string[];
    const groups = f.column("group_id") as number[];
    return new Map(ids.map((id, i) => [id, [groups[i], ...f.listAt("tokens", i)]]));
  };
  const parts = new Map([...(await byId(a)), ...(await byId(b))]);
  const all = await byId(whole);
  assert.equal(parts.size, all.size);
  for (const [id, tokens] of all) assert.deepEqual(parts.get(id), tokens, id);
});
