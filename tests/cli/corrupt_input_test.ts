/**
 * The stages on corrupt input whose manifest matches: `deno task mask` used to spin for minutes on list
 * offsets that go down (every row a 2^31-element range) and `deno task train` exited 0 on a batch whose
 * offsets made one row the whole column; a field-node count far beyond the metadata made Arrow JS loop
 * until it ran out of memory. Each is now one line naming the file and what is wrong, exit 2, nothing
 * written; `train` refuses a batch it cannot read whole before the model loads.
 */
import assert from "node:assert/strict";
import { dirname, join } from "node:path";
import { buildTable, listFromArrays, writeStageFile } from "../../lib/arrow/mod.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { asStageFile } from "../../lib/arrow/stage_io.ts";
import { Progress } from "../../lib/progress.ts";
import { openSession, train } from "../../lib/pipeline/mod.ts";
import {
  columnLayout,
  corruptFile,
  nodesVectorAt,
  PER_TOKEN,
  setListOffsets,
} from "../fixtures/arrow_corrupt.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const VOCAB = 512;
const ROWS = 8;

/** Runs `deno task <stage>` (the task's own permissions) and returns its exit code and output. */
async function runTask(stage: string, args: string[]): Promise<{ code: number; stderr: string }> {
  const tasks = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json"))).tasks;
  const [_deno, ...taskArgs] = (tasks[stage] as string).split(" ");
  const child = new Deno.Command(Deno.execPath(), {
    args: [...taskArgs, ...args],
    cwd: ROOT,
    stdout: "null",
    stderr: "piped",
  }).spawn();
  // A safety net only, so a regression cannot hang the suite: today's run takes well under a second.
  const guard = setTimeout(() => child.kill("SIGKILL"), 180_000);
  const out = await child.output();
  clearTimeout(guard);
  return { code: out.code, stderr: new TextDecoder().decode(out.stderr) };
}

/** Asserts a one-line refusal naming `path` and each fragment, and that `out` was not written. */
function assertRefused(
  result: { code: number; stderr: string },
  out: string,
  path: string,
  ...fragments: string[]
): void {
  assert.equal(result.code, 2, result.stderr);
  const lines = result.stderr.trim().split("\n").filter((l) => !l.startsWith("Task "));
  const error = lines.filter((l) => l.startsWith("error: "));
  assert.equal(error.length, 1, result.stderr);
  for (const f of [path, ...fragments]) assert.ok(error[0].includes(f), `"${f}" in: ${error[0]}`);
  const names = [...Deno.readDirSync(dirname(out))].map((e) => e.name);
  assert.ok(!names.some((n) => n.startsWith("out") || n.includes(".tmp-")), names.join(", "));
}

/** A scored file of ROWS rows in a fresh directory. */
async function scoredFile(): Promise<string> {
  const path = join(await Deno.makeTempDir({ prefix: "corrupt-stage-" }), "scored.arrow");
  await writeStageFile(path, "scored", sampleColumns("scored", ROWS), SAMPLE_META);
  return path;
}

Deno.test("deno task mask refuses list offsets that go down (it used to spin on them), writing nothing", async () => {
  const path = await scoredFile();
  const perToken = PER_TOKEN.filter((c) => c !== "loss_mask" && c !== "advantages");
  await corruptFile(path, (b, v) => setListOffsets(b, v, perToken, ROWS, (i) => (i % 2 ? 2 ** 31 - 1 : 0)));
  const out = join(dirname(path), "out.arrow");
  const result = await runTask("mask", ["--in", path, "--out", out]);
  assertRefused(result, out, path, 'column "tokens"', "offset");
});

Deno.test("deno task mask refuses a field-node count beyond the file (Arrow JS looped until out of memory)", async () => {
  const path = await scoredFile();
  await corruptFile(path, (b, v) => v.setUint32(nodesVectorAt(b) - 4, 100_000_000, true));
  const out = join(dirname(path), "out.arrow");
  const result = await runTask("mask", ["--in", path, "--out", out]);
  assertRefused(result, out, path, "field nodes", "100000000");
});

/** Columns of a ROWS-row batch whose tokens fit the tiny model's vocabulary. */
function batchColumns() {
  const tokens = Array.from(
    { length: ROWS },
    (_, i) => Int32Array.from({ length: 8 + i }, (_, k) => (k * 7 + i) % VOCAB),
  );
  const perToken = <T>(f: (t: Int32Array, i: number) => T) => tokens.map(f);
  return {
    ...sampleColumns("batch", ROWS),
    tokens: listFromArrays(tokens),
    prompt_len: Int32Array.from(tokens, () => 4),
    sampled: listFromArrays(perToken((t) => Uint8Array.from(t, (_, k) => (k >= 4 ? 1 : 0)))),
    logprobs: listFromArrays(perToken((t) => Float32Array.from(t, (_, k) => (k >= 4 ? -6 : 0)))),
    turn_idx: listFromArrays(perToken((t) => new Int16Array(t.length))),
    loss_mask: listFromArrays(perToken((t) => Uint8Array.from(t, (_, k) => (k >= 4 ? 1 : 0)))),
    advantages: listFromArrays(perToken((t, i) => new Float32Array(t.length).fill(i % 2 ? -1 : 1))),
  };
}

Deno.test("deno task train refuses offsets that make one row the whole column (it trained on them and exited 0)", async () => {
  const model = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 3 });
  const dir = await Deno.makeTempDir({ prefix: "corrupt-train-" });
  const path = join(dir, "batch.arrow");
  await writeStageFile(path, "batch", batchColumns(), { ...SAMPLE_META, sampling: { temperature: 1 } });
  const total = Array.from({ length: ROWS }, (_, i) => 8 + i).reduce((a, b) => a + b, 0);
  // Odd rows span every value, even rows are empty: the per-token lists stay equal in length.
  await corruptFile(path, (b, v) => setListOffsets(b, v, PER_TOKEN, ROWS - 1, (i) => (i % 2 ? total : 0)));
  assert.ok(columnLayout(await Deno.readFile(path), "tokens").buffers.length > 0);
  const out = join(dir, "out");
  const result = await runTask("train", [
    "--in",
    path,
    "--out",
    out,
    `--model.path=${model}`,
    "--train.lora.r=2",
  ]);
  assertRefused(result, out, path, 'column "tokens"', "offsets go down");
  assert.ok(!result.stderr.includes("loading the model"), result.stderr);
});

Deno.test("train refuses a batch it cannot read whole before the model loads (in-memory batches too)", async () => {
  const model = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 3 });
  const { config, hash } = await loadConfig({ overrides: [["model.path", model], ["train.lora.r", "2"]] });
  const good = batchColumns();
  const cases: Array<[Record<string, unknown>, string[]]> = [
    [{ sampled: listFromArrays([...Array(ROWS)].map((_, i) => new Uint8Array(i === 5 ? 2 : 8 + i))) }, [
      'column "sampled" row 5',
    ]],
    [{ turn_idx: listFromArrays([...Array(ROWS)].map((_, i) => new Int16Array(i === 2 ? 0 : 8 + i))) }, [
      'column "turn_idx" row 2',
    ]],
    [{ prompt_len: Int32Array.from({ length: ROWS }, (_, i) => (i === 6 ? 99 : 4)) }, [
      'column "prompt_len" row 6',
      "99",
    ]],
    [{
      tokens: listFromArrays(
        [...Array(ROWS)].map((_, i) => good.tokens.at(i).map(() => (i === 4 ? VOCAB : 1))),
      ),
    }, [
      'column "tokens" row 4',
      `${VOCAB}`,
      "vocab_size",
    ]],
  ];
  for (const [edit, fragments] of cases) {
    const table = buildTable("batch.arrow", "batch", { ...good, ...edit } as never, SAMPLE_META);
    const lines: string[] = [];
    const progress = new Progress({ write: (s) => void lines.push(s), isTerminal: false });
    const session = openSession(config, hash, { progress, showProgress: false });
    let caught: unknown;
    await train(session, asStageFile(table, "batch"), { step: 0 }).catch((e) => (caught = e));
    assert.ok(caught instanceof UserError, String(caught));
    for (const f of fragments) assert.ok(caught.message.includes(f), `"${f}" in: ${caught.message}`);
    assert.ok(!session.trainerOpen, "the trainer (the model) was opened before the batch was checked");
    assert.ok(!lines.some((l) => l.includes("loading the model")), lines.join(""));
    await session.close();
  }
});
