/**
 * The stage scripts as a user runs them: `--help`, missing or bad flags, bad config overrides, and
 * stages whose body a later issue writes (exit 2, nothing written). RELIABILITY.md items 35–36.
 */

import assert from "node:assert/strict";
import { join } from "node:path";

const STAGES = ["rollout", "score", "mask", "train", "loop", "eval"] as const;
const ROOT = new URL("..", import.meta.url).pathname;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function runStage(stage: string, args: string[]): Promise<Run> {
  const command = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--quiet", join(ROOT, "stages", `${stage}.ts`), ...args],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    env: { NO_COLOR: "1" },
  });
  const out = await command.output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code: out.code, stdout: decode(out.stdout), stderr: decode(out.stderr) };
}

/** Non-empty lines of a stream. */
function lines(text: string): string[] {
  return text.split("\n").filter((l) => l.trim() !== "");
}

for (const stage of STAGES) {
  Deno.test(`${stage} --help prints usage and the configuration keys, exit 0`, async () => {
    const r = await runStage(stage, ["--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`deno task ${stage} `));
    assert.match(r.stdout, /--config FILE/);
    assert.match(r.stdout, /train\.lora\.r/);
  });
}

Deno.test("a missing --in path gives one line naming the path, exit 2", async () => {
  const r = await runStage("score", ["--in", "/nonexistent/rollouts.arrow", "--out", "/tmp/x.arrow"]);
  assert.equal(r.code, 2);
  assert.equal(lines(r.stderr).length, 1, r.stderr);
  assert.match(r.stderr, /--in \/nonexistent\/rollouts\.arrow: it does not exist/);
});

Deno.test("a required flag left out is named, exit 2", async () => {
  const r = await runStage("mask", ["--out", "/tmp/x.arrow"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--in FILE is required/);
});

Deno.test("an unknown flag and a bad override each give one line with the fix, exit 2", async () => {
  const flag = await runStage("rollout", ["--out", "/tmp/x.arrow", "--bogus"]);
  assert.equal(flag.code, 2);
  assert.equal(lines(flag.stderr).length, 1, flag.stderr);
  assert.match(flag.stderr, /--help/);
  const key = await runStage("rollout", ["--out", "/tmp/x.arrow", "--rollout.temprature=0.5"]);
  assert.equal(key.code, 2);
  assert.equal(lines(key.stderr).length, 1, key.stderr);
  assert.match(key.stderr, /temprature/);
  assert.match(key.stderr, /valid keys in rollout: group_size/);
  const range = await runStage("rollout", ["--out", "/tmp/x.arrow", "--rollout.generation.temperature=-1"]);
  assert.equal(range.code, 2);
  assert.match(range.stderr, /rollout\.generation\.temperature/);
});
