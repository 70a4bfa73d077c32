/**
 * The stage scripts as a user runs them: `--help`, missing or bad flags, bad config overrides, bad
 * paths, stray arguments, the demo's command line, and stages whose body a later issue writes (exit 2,
 * nothing written). Every user mistake is one line on stderr and exit 2, found before any model loads
 * (the train stage's first progress line, "train: loading the model", never appears). Also the
 * progress reporter (lib/progress.ts).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { writeStageFile } from "../../lib/arrow/mod.ts";
import { Progress } from "../../lib/progress.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { DEMO_CONFIG } from "../../stages/demo.ts";
import { denoRunArgs } from "../helpers/commands.ts";
import { fileURLToPath } from "node:url";

const STAGES = ["rollout", "score", "mask", "train", "loop", "eval"] as const;
const ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

async function runStage(stage: string, args: string[]): Promise<Run> {
  const script = stage === "make-model" ? "scripts/make_model.ts" : `stages/${stage}.ts`;
  const command = new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs(script), ...args],
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

/** Each stage's own flags in its --help, and the input/output flags it does not read (absent). */
const OWN_FLAGS: Record<(typeof STAGES)[number], { has: string[]; lacks: string[] }> = {
  rollout: { has: ["--out PATH", "--step N", "--shard i/n"], lacks: ["--in", "--adapter", "--resume"] },
  score: { has: ["--in FILE", "--out PATH"], lacks: ["--step", "--adapter", "--resume"] },
  mask: { has: ["--in FILE", "--out PATH"], lacks: ["--step", "--adapter", "--resume"] },
  train: { has: ["--in FILE", "--out PATH", "--adapter DIR"], lacks: ["--step", "--resume"] },
  loop: { has: ["--resume"], lacks: ["--in", "--out", "--adapter"] },
  eval: { has: ["--out PATH"], lacks: ["--in", "--adapter", "--resume"] },
};

for (const stage of STAGES) {
  Deno.test(`${stage} --help prints its own usage and flags and the configuration keys, exit 0`, async () => {
    const r = await runStage(stage, ["--help"]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`^deno task ${stage} `));
    const flags = r.stdout.split("\nFlags:\n")[1]?.split("\n\n")[0] ?? "";
    const listed = flags.split("\n").map((l) => l.trim().split(/\s{2,}/)[0]);
    for (const flag of OWN_FLAGS[stage].has) {
      assert.ok(listed.includes(flag), `${stage}: no ${flag} in ${listed}`);
    }
    for (const flag of OWN_FLAGS[stage].lacks) {
      assert.ok(
        !listed.some((l) => l.split(" ")[0] === flag),
        `${stage} lists ${flag}, which it does not read`,
      );
    }
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

/** A batch file, a tiny model and a regular file, for the train stage's argument checks. */
async function trainFixture() {
  const dir = await Deno.makeTempDir({ prefix: "stage-cli-" });
  const batch = join(dir, "batch.arrow");
  await writeStageFile(batch, "batch", sampleColumns("batch", 2), SAMPLE_META);
  const model = await makeTinyModel({ vocab: 512, tokenizer: false, seed: 3 });
  const file = join(dir, "notes.txt");
  await Deno.writeTextFile(file, "not a model");
  return { dir, batch, model, file, args: ["--in", batch, `--model.path=${model}`] };
}

/** Asserts exit 2, exactly one stderr line matching `pattern`, and no model loading. */
function assertOneLine(r: Run, pattern: RegExp): void {
  assert.equal(r.code, 2, r.stderr);
  assert.equal(lines(r.stderr).length, 1, r.stderr);
  assert.match(r.stderr, pattern);
  assert.doesNotMatch(r.stderr, /loading the model|at .*\.ts:\d+/);
}

Deno.test("train: a file as --adapter or model.path, a bad --out parent, a wrong --in kind: one line, exit 2", async () => {
  const { dir, batch, model, file, args } = await trainFixture();
  const out = ["--out", join(dir, "adapter")];
  assertOneLine(
    await runStage("train", [...args, ...out, "--adapter", file]),
    /model\.adapter .*it is a file/,
  );
  assertOneLine(
    await runStage("train", [...args, ...out, `--model.adapter=${dir}`]),
    /has no adapter_config\.json/,
  );
  assertOneLine(
    await runStage("train", ["--in", batch, ...out, `--model.path=${file}`]),
    /model\.path .*it is a file, not a Qwen3 model directory/,
  );
  assertOneLine(
    await runStage("train", [...args, "--out", join(file, "adapter")]),
    /its parent .* is a file/,
  );
  assertOneLine(
    await runStage("train", [...args, "--out", "/proc/deno-rl/adapter"]),
    /--out \/proc\/deno-rl\/adapter: this command may not touch it/,
  );
  const scored = join(dir, "scored.arrow");
  await writeStageFile(scored, "scored", sampleColumns("scored", 2), SAMPLE_META);
  assertOneLine(
    await runStage("train", ["--in", scored, ...out, `--model.path=${model}`]),
    /it is a scored file; this stage reads a batch file/,
  );
  await Deno.writeTextFile(join(dir, "raw.arrow"), "ARROW1");
  assertOneLine(await runStage("train", ["--in", join(dir, "raw.arrow"), ...out]), /has no valid manifest/);
});

Deno.test("stray positional arguments and dash-led values are refused in the toolkit's words", async () => {
  assertOneLine(await runStage("mask", ["--in", "a.arrow", "extra"]), /unexpected argument \(got "extra"\)/);
  assertOneLine(await runStage("make-model", ["--out", "/tmp/m", "--hidden", "-5"]), /--hidden \(got "-5"\)/);
  assertOneLine(await runStage("make-model", ["--out", "/tmp/m", "--heads", "5"]), /--heads \/ --kv-heads/);
  assertOneLine(await runStage("make-model", ["--out", "/tmp/m", "--hidden"]), /--hidden needs a value/);
  const huge = await runStage("make-model", ["--out", "/tmp/m", "--hidden", "100000000", "--layers", "1000"]);
  assertOneLine(huge, /GiB.*would not fit in memory/);
  const flag = await runStage("train", ["--bogus=1"]);
  assertOneLine(flag, /unknown flag --bogus/);
  assert.doesNotMatch(flag.stderr, /ambiguous|positional argument/);
});

Deno.test("demo: --help prints usage, --bogus and stray arguments are refused, --print-config shows overrides", async () => {
  const help = await runStage("demo", ["--help"]);
  assert.equal(help.code, 0, help.stderr);
  assert.match(help.stdout, /deno task demo \[--config FILE\]/);
  assertOneLine(await runStage("demo", ["--bogus=1"]), /unknown flag --bogus/);
  assertOneLine(await runStage("demo", ["now"]), /unexpected argument/);
  assertOneLine(await runStage("demo", ["--train.bogus=1"]), /bogus/);
  const printed = await runStage("demo", ["--print-config", "--train.num_iterations=7"]);
  assert.equal(printed.code, 0, printed.stderr);
  assert.match(printed.stdout, /num_iterations: 7/);
  // The demo's settings come from configs/demo.yaml, the override on top.
  const expected = await loadConfig({ file: DEMO_CONFIG, overrides: [["train.num_iterations", "7"]] });
  assert.match(printed.stdout, new RegExp(`# config hash ${expected.hash}`));
});

Deno.test("--print-config prints the resolved configuration without checking or writing paths", async () => {
  const r = await runStage("train", [
    "--in",
    "/nonexistent.arrow",
    "--out",
    ".",
    "--train.lora.r=4",
    "--print-config",
  ]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^# config hash [0-9a-f]{64}$/m);
  assert.match(r.stdout, /^\s+r: 4$/m);
});

Deno.test("progress: plain lines off a terminal (start, the first noted tick, one per 2 s, the last, done)", () => {
  const out: string[] = [];
  let now = 0;
  const progress = new Progress({ write: (t) => out.push(t), isTerminal: false }, () => now);
  const task = progress.start("train: steps", 1000);
  for (let step = 1; step <= 1000; step++) {
    now = step * 10; // a step every 10 ms: 10 s in all
    task.tick(1, `loss ${step}`);
  }
  task.done("1000 steps");
  assert.deepEqual(out, [
    "train: steps …\n",
    "train: steps 1/1000 loss 1\n",
    ...[201, 401, 601, 801].map((s) => `train: steps ${s}/1000 loss ${s}\n`),
    "train: steps 1000/1000 loss 1000\n",
    "train: steps: 1000 steps\n",
  ]);
});

Deno.test("progress: on a terminal a counted task is one redrawn bar, and log lines go above it", () => {
  const out: string[] = [];
  const progress = new Progress({ write: (t) => out.push(t), isTerminal: true });
  const task = progress.start("rollout", 4);
  task.tick(2, "12 tok/s");
  progress.log("a note");
  task.done("4 episodes");
  const text = out.join("").replaceAll("\x1b[2K", "<clear>");
  assert.match(text, /\r<clear>rollout \[#{12}-{12}\] 2\/4 12 tok\/s/);
  assert.match(text, /a note\n\r<clear>rollout \[#{12}-{12}\] 2\/4/);
  assert.ok(text.endsWith("rollout: 4 episodes\n"), JSON.stringify(text));
  assert.ok(!text.includes("\n\n"));
});
