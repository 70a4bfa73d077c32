/**
 * The output policy (lib/fs/output.ts, docs/outputs.md) as a user meets it: for every command that
 * writes, an `--out` that is `.`, a repository root, the home directory, the input, a parent of the
 * input, a non-empty foreign directory or a foreign file is refused with exit 2, one line, and the disk
 * unchanged (tree hashes before and after); an earlier output of ours is replaced only with
 * `--overwrite`; a SIGKILL at every step of a replacement leaves one complete output.
 */

import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { readStageFile, writeStageFile } from "../../lib/arrow/mod.ts";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import { UserError } from "../../lib/errors.ts";
import { writeDirAtomic } from "../../lib/fs/atomic_dir.ts";
import { checkOutputPath, OUTPUT_MARKER } from "../../lib/fs/output.ts";
import { recoverReplacement } from "../../lib/fs/replace.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { makeRunDir } from "../fixtures/run_dir.ts";
import { denoRunArgs } from "../helpers/commands.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url)).replace(/\/$/, "");

interface Run {
  code: number;
  stderr: string;
}

async function run(
  script: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string> } = {},
) {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs(script), ...args],
    cwd: opts.cwd ?? ROOT,
    env: { NO_COLOR: "1", ...opts.env },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) } as Run;
}

/** sha256 over every path and file content below `dir` (symlinks not followed). */
async function treeHash(dir: string): Promise<string> {
  const parts: string[] = [];
  async function walk(d: string): Promise<void> {
    const entries = [];
    for await (const e of Deno.readDir(d)) entries.push(e);
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      const p = join(d, e.name);
      parts.push(relative(dir, p));
      if (e.isDirectory) await walk(p);
      else if (e.isFile) parts.push(await sha256Hex(await Deno.readFile(p)));
    }
  }
  await walk(dir);
  return await sha256Hex(new TextEncoder().encode(parts.join("\n")));
}

async function writeBatch(path: string, rows = 2): Promise<void> {
  await writeStageFile(path, "batch", sampleColumns("batch", rows), SAMPLE_META);
}

/** A workspace: a batch file, a foreign file, a non-empty foreign directory, a git repo, a home dir. */
async function workspace() {
  const dir = await Deno.makeTempDir({ prefix: "out-policy-" });
  const data = join(dir, "data");
  await Deno.mkdir(join(data, "notes"), { recursive: true });
  await writeBatch(join(data, "batch.arrow"));
  await Deno.writeTextFile(join(dir, "essay.txt"), "mine");
  await Deno.writeTextFile(join(data, "notes", "todo.md"), "keep me");
  await Deno.mkdir(join(dir, "repo", ".git"), { recursive: true });
  await Deno.writeTextFile(join(dir, "repo", "main.ts"), "code");
  await Deno.mkdir(join(dir, "home"));
  await Deno.writeTextFile(join(dir, "home", ".bashrc"), "rc");
  return { dir, batch: join(data, "batch.arrow") };
}

/** The `--out` values every writing command must refuse, relative to the workspace (the cwd). */
const REFUSED: Array<[string, string, RegExp]> = [
  ["the current directory", ".", /current directory/],
  ["a repository root", "repo", /root of a git repository/],
  ["the home directory", "home", /home directory/],
  ["the input", "data/batch.arrow", /input of this command/],
  ["a parent of the input", "data", /holds an input/],
  ["a non-empty foreign directory", "data/notes", /(did not write|holds an input)/],
  ["a foreign file", "essay.txt", /file this toolkit did not write/],
];

/** Each writing command with the arguments it needs besides --out. */
async function writers(batch: string) {
  const model = await makeTinyModel({ vocab: 512, tokenizer: false, seed: 3 });
  return [
    {
      name: "train",
      script: "stages/train.ts",
      args: ["--in", batch, `--model.path=${model}`],
      hasInput: true,
    },
    { name: "make-model", script: "scripts/make_model.ts", args: [], hasInput: false },
    { name: "rollout", script: "stages/rollout.ts", args: [`--model.path=${model}`], hasInput: false },
    { name: "score", script: "stages/score.ts", args: ["--in", batch], hasInput: true },
    { name: "mask", script: "stages/mask.ts", args: ["--in", batch], hasInput: true },
    { name: "eval", script: "stages/eval.ts", args: [`--model.path=${model}`], hasInput: false },
    { name: "report", script: "stages/report.ts", args: [await makeRunDir({ steps: 1 })], hasInput: false },
  ];
}

Deno.test("every writing command refuses --out ., a repo root, $HOME, the input, its parent, foreign dirs and files; nothing changes", async () => {
  const { dir, batch } = await workspace();
  // Deno keeps its cache under $HOME unless DENO_DIR says otherwise: keep the real one.
  const denoDir = Deno.env.get("DENO_DIR") ?? join(Deno.env.get("HOME") ?? "/root", ".cache", "deno");
  const env = { HOME: join(dir, "home"), DENO_DIR: denoDir };
  for (const w of await writers(batch)) {
    for (const [what, out, message] of REFUSED) {
      const before = await treeHash(dir);
      const r = await run(w.script, [...w.args, "--out", out, "--overwrite"], { cwd: dir, env });
      assert.equal(r.code, 2, `${w.name} --out ${what}: ${r.stderr}`);
      assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
      // make-model reads no input: there the input is just an existing file or directory not of its kind.
      const expected = w.hasInput || !/input/.test(what) ? message : /already exists and is/;
      assert.match(r.stderr, expected, `${w.name} --out ${what}`);
      assert.equal(await treeHash(dir), before, `${w.name} --out ${what} changed the disk`);
    }
  }
});

Deno.test("the toolkit's own directory and / are refused as --out", async () => {
  for (const out of [ROOT, "/"]) {
    const r = await run("scripts/make_model.ts", ["--out", out, "--overwrite"], { cwd: "/tmp" });
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /(toolkit's own directory|root directory|current directory)/);
  }
});

Deno.test("an earlier output of ours is replaced only with --overwrite, and nothing is left aside", async () => {
  const { dir } = await workspace();
  const out = join(dir, "model");
  assert.equal((await run("scripts/make_model.ts", ["--out", out], { cwd: dir })).code, 0);
  const first = await treeHash(out);
  const again = await run("scripts/make_model.ts", ["--out", out, "--seed", "1"], { cwd: dir });
  assert.equal(again.code, 2);
  assert.match(again.stderr, /pass --overwrite to replace it/);
  assert.equal(await treeHash(out), first);
  const replaced = await run("scripts/make_model.ts", ["--out", out, "--seed", "1", "--overwrite"], {
    cwd: dir,
  });
  assert.equal(replaced.code, 0, replaced.stderr);
  assert.notEqual(await treeHash(out), first);
  const names = [];
  for await (const e of Deno.readDir(dir)) names.push(e.name);
  assert.ok(!names.some((n) => n.includes(".old-") || n.includes(".tmp-")), names.join(" "));
});

Deno.test("checkOutputPath: an output of another kind, an unwritable parent and a parent that is a file are refused", async () => {
  const { dir, batch } = await workspace();
  const refuse = (path: string, spec: Parameters<typeof checkOutputPath>[1], pattern: RegExp) =>
    assert.rejects(
      () => checkOutputPath(path, spec, { overwrite: true }),
      (e) => e instanceof UserError && pattern.test(e.message) && !e.message.includes("\n"),
    );
  await refuse(batch, { kind: "stage-file", fileKind: "scored" }, /is a batch stage file, not a scored/);
  await refuse(join(dir, "essay.txt", "out.arrow"), { kind: "stage-file", fileKind: "batch" }, /is a file/);
  await refuse("/proc/deno-rl-no/out", { kind: "adapter-dir" }, /not writable/);
  assert.equal(
    await checkOutputPath(batch, { kind: "stage-file", fileKind: "batch" }, { overwrite: true }),
    "ours",
  );
  assert.equal(
    await checkOutputPath(join(dir, "new", "x.arrow"), { kind: "stage-file", fileKind: "batch" }),
    "absent",
  );
  await Deno.mkdir(join(dir, "empty"));
  assert.equal(await checkOutputPath(join(dir, "empty"), { kind: "adapter-dir" }), "empty");
  await writeDirAtomic(join(dir, "run"), async () => {}, { kind: "run-dir" });
  assert.ok(await Deno.stat(join(dir, "run", OUTPUT_MARKER)));
  assert.equal(await checkOutputPath(join(dir, "run"), { kind: "run-dir" }, { resume: true }), "ours");
  await refuse(join(dir, "run"), { kind: "adapter-dir" }, /is a run directory, not an adapter directory/);
});

/** Runs a child that replaces `path` (a stage file or a directory) and kills itself at `step`. */
async function killedReplacement(path: string, what: "file" | "dir", step: string): Promise<number> {
  const lib = (p: string) => JSON.stringify(new URL(`../../lib/${p}`, import.meta.url).href);
  const fixtures = JSON.stringify(new URL("../fixtures/arrow_samples.ts", import.meta.url).href);
  const code = what === "file"
    ? `import { writeStageFile } from ${lib("arrow/write.ts")};
       import { SAMPLE_META, sampleColumns } from ${fixtures};
       await writeStageFile(${JSON.stringify(path)}, "batch", sampleColumns("batch", 5), SAMPLE_META);`
    : `import { writeDirAtomic } from ${lib("fs/atomic_dir.ts")};
       await writeDirAtomic(${JSON.stringify(path)}, (tmp) => Deno.writeTextFile(tmp + "/v.txt", "new"),
         { kind: "adapter-dir" });`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["eval", "--quiet", code],
    env: { DENO_RL_CRASH_AT: step },
    stdout: "null",
    stderr: "piped",
  }).output();
  return out.signal === "SIGKILL" ? 137 : out.code;
}

Deno.test("a SIGKILL at every step of replacing a stage file leaves one complete file, old or new", async () => {
  for (
    const step of ["file-manifest-aside", "file-data-aside", "file-data-renamed", "file-manifest-renamed"]
  ) {
    const dir = await Deno.makeTempDir({ prefix: "kill-file-" });
    const path = join(dir, "batch.arrow");
    await writeBatch(path, 2);
    assert.equal(await killedReplacement(path, "file", step), 137, step);
    await recoverReplacement(path, true);
    const rows = (await readStageFile(path, "batch")).rows;
    assert.ok(rows === 2 || rows === 5, `${step}: ${rows} rows`);
    assert.equal(rows, step === "file-manifest-renamed" ? 5 : 2, step);
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e.name);
    assert.ok(!names.some((n) => n.includes(".old-")), `${step}: ${names.join(" ")}`);
  }
});

Deno.test("a SIGKILL at every step of replacing a directory leaves one complete directory, old or new", async () => {
  for (const [step, expected] of [["dir-aside", "old"], ["dir-renamed", "new"]]) {
    const dir = await Deno.makeTempDir({ prefix: "kill-dir-" });
    const path = join(dir, "adapter");
    await writeDirAtomic(path, (tmp) => Deno.writeTextFile(join(tmp, "v.txt"), "old"), {
      kind: "adapter-dir",
    });
    assert.equal(await killedReplacement(path, "dir", step), 137, step);
    await checkOutputPath(path, { kind: "adapter-dir" }, { overwrite: true }); // recovers first
    assert.equal(await Deno.readTextFile(join(path, "v.txt")), expected, step);
    assert.ok(await Deno.stat(join(path, OUTPUT_MARKER)));
  }
});
