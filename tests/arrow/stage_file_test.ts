/**
 * The Arrow stage-file contract: round trips of every kind (empty lists, tool-call structs, emoji,
 * zero rows), flat list columns, atomic writes under SIGKILL, and one-line UserErrors naming the file
 * or column for truncated, corrupted, mislabelled and mistyped files (docs/RELIABILITY.md items 26-29).
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import {
  Float64,
  makeData,
  RecordBatch,
  Schema,
  Struct,
  Table,
  type Vector,
  vectorFromArray,
} from "apache-arrow";
import {
  appendColumns,
  buildTable,
  type ColumnInput,
  FlatList,
  inheritMetadata,
  listColumn,
  listFromArrays,
  manifestPath,
  readStageFile,
  STAGE_KINDS,
  StageFile,
  type StageKind,
  writeStageFile,
} from "../../lib/arrow/mod.ts";
import { sha256Hex } from "../../lib/fs/sha256.ts";
import {
  assertUserError,
  editedTable,
  exists,
  startSlowWriter,
  tempDir,
  tempFiles,
  writeRaw,
} from "../fixtures/arrow_helpers.ts";
import {
  batchOwnColumns,
  rolloutColumns,
  SAMPLE_META,
  sampleColumns,
  scoredOwnColumns,
} from "../fixtures/arrow_samples.ts";

/** What `StageFile.column` should return for a column the test supplied as `input`. */
function expectedValues(input: ColumnInput): unknown[] {
  if (input instanceof FlatList) return Array.from({ length: input.length }, (_, i) => input.at(i));
  return Array.from(input as ArrayLike<unknown>);
}

function assertColumnsEqual(kind: StageKind, n: number, file: StageFile): void {
  for (const [name, input] of Object.entries(sampleColumns(kind, n))) {
    assert.equal(JSON.stringify(file.column(name)), JSON.stringify(expectedValues(input)), name);
  }
}

for (const kind of STAGE_KINDS) {
  Deno.test(`writeStageFile/readStageFile round-trip a ${kind} file`, async () => {
    const dir = await tempDir();
    const path = join(dir, `${kind}.arrow`);
    const n = 9;
    const written = await writeStageFile(path, kind, sampleColumns(kind, n), SAMPLE_META);
    assert.equal(written.rows, n);
    const file = await readStageFile(path, kind);
    assert.equal(file.rows, n);
    assert.equal(file.sha256, written.sha256);
    assert.equal(file.metadata.kind, kind);
    assert.equal(file.metadata.format_version, 1);
    assert.equal(file.metadata.seed, 7);
    assert.deepEqual(file.metadata.sampling, SAMPLE_META.sampling);
    assertColumnsEqual(kind, n, file);
    await Deno.remove(dir, { recursive: true });
  });

  Deno.test(`a zero-row ${kind} file is valid`, async () => {
    const dir = await tempDir();
    const path = join(dir, `${kind}.arrow`);
    const written = await writeStageFile(path, kind, sampleColumns(kind, 0), SAMPLE_META);
    assert.equal(written.rows, 0);
    const file = await readStageFile(path, kind);
    assert.equal(file.rows, 0);
    for (const name of file.columnNames) assert.deepEqual(file.column(name), []);
    await Deno.remove(dir, { recursive: true });
  });
}

Deno.test("rollouts keep empty lists, tool-call structs and emoji text exactly", async () => {
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  await writeStageFile(path, "rollouts", rolloutColumns(6), SAMPLE_META);
  const file = await readStageFile(path, "rollouts");
  assert.deepEqual(file.listAt("tokens", 0), new Int32Array(0));
  assert.deepEqual(file.listAt("tokens", 3), Int32Array.from([151647, 151648, 151649]));
  assert.deepEqual(file.listAt("logprobs", 2), Float32Array.from([0, -0.5]));
  assert.deepEqual(file.column("tool_calls")[0], []);
  assert.deepEqual(file.column("tool_calls")[1], [{
    turn: 1,
    name: "calculator",
    arguments: '{"expression":"1+1"}',
    status: "ok",
    output: "2 ✅",
    ms: 1.5,
  }]);
  assert.deepEqual(file.json("messages", 1), [{ role: "assistant", content: "<think>日本語 😀</think>2" }]);
  assert.equal(
    file.column("prompt_messages")[2],
    JSON.stringify([{ role: "user", content: "What is 2+1? 🤔" }]),
  );
  await Deno.remove(dir, { recursive: true });
});

Deno.test("listColumn from a flat array equals listFromArrays of the rows, and reads back zero-copy", async () => {
  const rows = [Int32Array.from([1, 2]), new Int32Array(0), Int32Array.from([3]), new Int32Array(0)];
  const fromRows = listFromArrays(rows);
  const flat = listColumn(Int32Array.from([1, 2, 3]), Int32Array.from([0, 2, 2, 3, 3]));
  assert.deepEqual(flat.values, fromRows.values);
  assert.deepEqual(flat.offsets, fromRows.offsets);
  for (let i = 0; i < rows.length; i++) assert.deepEqual(flat.at(i), rows[i]);
  assert.throws(() => listColumn(new Int32Array(2), Int32Array.from([0, 3])), RangeError);
  assert.throws(() => listColumn(new Int32Array(2), Int32Array.from([0, 2, 1])), RangeError);

  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  await writeStageFile(path, "rollouts", rolloutColumns(5), SAMPLE_META);
  const file = await readStageFile(path, "rollouts");
  const tokens = file.listColumn<Int32Array>("tokens");
  assert.ok(tokens.values instanceof Int32Array);
  assert.equal(tokens.values.buffer, file.table.getChild("tokens")!.data[0].children[0].values.buffer);
  assert.deepEqual(tokens.offsets, Int32Array.from([0, 0, 1, 3, 6, 6]));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a 4096×1000-token list column builds from one flat array and round-trips", async () => {
  const rows = 4096;
  const len = 1000;
  const values = new Int32Array(rows * len);
  for (let i = 0; i < values.length; i++) values[i] = i % 151936;
  const offsets = Int32Array.from({ length: rows + 1 }, (_, i) => i * len);
  const tokens = listColumn(values, offsets);
  const base = rolloutColumns(rows);
  const same = <T extends Int32Array | Float32Array | Uint8Array | Int16Array>(
    ctor: { new (n: number): T },
  ) => listColumn(new ctor(rows * len), offsets);
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  const cols = {
    ...base,
    tokens,
    sampled: same(Uint8Array),
    logprobs: same(Float32Array),
    turn_idx: same(Int16Array),
  };
  await writeStageFile(path, "rollouts", cols, SAMPLE_META);
  const file = await readStageFile(path, "rollouts");
  const back = file.listColumn<Int32Array>("tokens");
  assert.deepEqual(back.offsets, offsets);
  assert.deepEqual(back.values, values);
  assert.deepEqual(file.listAt("tokens", 4095), values.subarray(4095 * len));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("scored = rollouts + own columns via appendColumns, with input hashes recorded", async () => {
  const dir = await tempDir();
  const rpath = join(dir, "rollouts.arrow");
  const spath = join(dir, "scored.arrow");
  const bpath = join(dir, "batch.arrow");
  await writeStageFile(rpath, "rollouts", rolloutColumns(4), SAMPLE_META);
  const rollouts = await readStageFile(rpath, "rollouts");
  await writeStageFile(
    spath,
    "scored",
    appendColumns(rollouts, "scored", scoredOwnColumns(4)),
    inheritMetadata(rollouts, { config_hash: "c2" }),
  );
  const scored = await readStageFile(spath, "scored");
  assert.deepEqual(scored.listAt("tokens", 3), rollouts.listAt("tokens", 3));
  assert.deepEqual(scored.metadata.input_hashes, { rollouts: rollouts.sha256 });
  assert.equal(scored.metadata.model, "tiny-qwen3");
  assert.equal(scored.metadata.config_hash, "c2");
  assert.ok(scored.has("reward_format"));

  await writeStageFile(
    bpath,
    "batch",
    appendColumns(scored, "batch", batchOwnColumns(4)),
    inheritMetadata(scored, { config_hash: "c3" }),
  );
  const batch = await readStageFile(bpath, "batch");
  assert.deepEqual(batch.metadata.input_hashes, { rollouts: rollouts.sha256, scored: scored.sha256 });
  assert.deepEqual(batch.column("reward_correct"), [0, 1, 0, 1]);

  await assertUserError(
    () => appendColumns(scored, "batch", { ...batchOwnColumns(4), reward: new Float32Array(4) }),
    'column "reward"',
    "stage score",
  );
  // Re-running the score stage over its own output may replace its columns.
  const again = appendColumns(scored, "scored", { reward: new Float32Array(4) });
  assert.ok(again.reward instanceof Float32Array);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("the writer refuses missing, unknown, mistyped and ragged columns, naming them", async () => {
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  const cols = rolloutColumns(3);
  const { tokens: _, ...noTokens } = cols;
  await assertUserError(
    () => writeStageFile(path, "rollouts", noTokens, SAMPLE_META),
    'column "tokens"',
    "missing",
  );
  await assertUserError(
    () => writeStageFile(path, "rollouts", { ...cols, extra: [1, 2, 3] }, SAMPLE_META),
    'column "extra"',
  );
  await assertUserError(
    () =>
      writeStageFile(
        path,
        "scored",
        { ...sampleColumns("scored", 3), rewardFoo: new Float32Array(3) },
        SAMPLE_META,
      ),
    'column "rewardFoo"',
    "reward_<name>",
  );
  await assertUserError(
    () => writeStageFile(path, "rollouts", { ...cols, episode_id: [1, 2, 3] }, SAMPLE_META),
    'column "episode_id"',
    "not a well-formed string",
  );
  await assertUserError(
    () => writeStageFile(path, "rollouts", { ...cols, group_id: [0, 1.5, 2] }, SAMPLE_META),
    'column "group_id"',
    "not an integer",
  );
  await assertUserError(
    () =>
      writeStageFile(
        path,
        "rollouts",
        { ...cols, prompt_len: vectorFromArray([1, 2, 3], new Float64()) },
        SAMPLE_META,
      ),
    'column "prompt_len"',
    "Float64",
  );
  await assertUserError(
    () => writeStageFile(path, "rollouts", { ...cols, num_turns: new Int16Array(2) }, SAMPLE_META),
    'column "num_turns"',
    "2 rows",
  );
  await assertUserError(
    () => writeStageFile(path, "rollouts", { ...cols, messages: ["ok", "\ud800", "ok"] }, SAMPLE_META),
    'column "messages"',
    "value 1",
  );
  const { model: _m, ...noModel } = SAMPLE_META;
  await assertUserError(() => writeStageFile(path, "rollouts", cols, noModel), 'metadata key "model"');
  await assertUserError(
    () => writeStageFile(path, "rollouts", cols, { ...SAMPLE_META, modle: "x" } as never),
    '"modle"',
  );
  assert.equal(await exists(path), false);
  await Deno.remove(dir, { recursive: true });
});

/** A written rollouts file in a fresh directory. */
async function goodFile(): Promise<{ dir: string; path: string }> {
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  await writeStageFile(path, "rollouts", rolloutColumns(50), SAMPLE_META);
  return { dir, path };
}

Deno.test("a missing file, a missing manifest, a truncated file and a flipped byte each name the file", async () => {
  const { dir, path } = await goodFile();
  const bytes = await Deno.readFile(path);
  await assertUserError(
    () => readStageFile(join(dir, "nope.arrow"), "rollouts"),
    "nope.arrow",
    "does not exist",
    "deno task rollout",
  );

  await Deno.writeFile(path, bytes.subarray(0, bytes.length - 100));
  await assertUserError(
    () => readStageFile(path, "rollouts"),
    path,
    "truncated or corrupted",
    "size check failed",
  );

  const flipped = bytes.slice();
  flipped[Math.floor(bytes.length / 2)] ^= 0x01;
  await Deno.writeFile(path, flipped);
  await assertUserError(
    () => readStageFile(path, "rollouts"),
    path,
    "sha256 check failed",
    "re-run stage rollout",
  );

  await Deno.writeFile(path, bytes);
  await Deno.remove(manifestPath(path));
  await assertUserError(() => readStageFile(path, "rollouts"), path, "manifest", "is missing");
  const file = await readStageFile(path, "rollouts", { requireManifest: false });
  assert.equal(file.rows, 50);

  // Without a manifest, a truncated file must still fail with a UserError, never a raw TypeError.
  for (const cut of [8, 100, bytes.length - 10]) {
    await Deno.writeFile(path, bytes.subarray(0, cut));
    await assertUserError(
      () => readStageFile(path, "rollouts", { requireManifest: false }),
      path,
      "truncated or corrupted",
    );
  }
  await Deno.remove(dir, { recursive: true });
});

Deno.test("bytes that match their manifest but are not Arrow give a UserError, not a TypeError", async () => {
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  const junk = new TextEncoder().encode("ARROW1\0\0" + "x".repeat(200) + "ARROW1");
  await Deno.writeFile(path, junk);
  const manifest = {
    kind: "rollouts",
    format_version: 1,
    rows: 0,
    sha256: await sha256Hex(junk),
    bytes: junk.length,
  };
  await Deno.writeTextFile(manifestPath(path), JSON.stringify(manifest));
  await assertUserError(() => readStageFile(path, "rollouts"), path, "Arrow structure check failed");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("wrong kind, other format_version, missing column and wrong column type name expected and actual", async () => {
  const dir = await tempDir();
  const { path: rpath } = { path: join(dir, "rollouts.arrow") };
  await writeStageFile(rpath, "rollouts", rolloutColumns(3), SAMPLE_META);
  await assertUserError(
    () => readStageFile(rpath, "scored"),
    rpath,
    'expected a "scored" file',
    '"rollouts"',
    "stage score",
  );

  const path = join(dir, "edited.arrow");
  await writeRaw(path, editedTable((meta) => meta.set("format_version", "2")));
  await assertUserError(
    () => readStageFile(path, "rollouts"),
    path,
    "format_version is 2",
    "format_version 1",
  );

  // A column twice (pyarrow can write that): the stages read the first of a name, the checks saw the last.
  const good = editedTable(() => {});
  const twice = new Schema(
    [good.schema.fields.find((f) => f.name === "sampled")!, ...good.schema.fields],
    good.schema.metadata,
  );
  const [batch] = good.batches;
  const children = [batch.getChild("sampled")!.data[0], ...batch.data.children];
  const data = makeData({ type: new Struct(twice.fields), length: batch.numRows, nullCount: 0, children });
  await writeRaw(path, new Table([new RecordBatch(twice, data)]));
  await assertUserError(() => readStageFile(path, "rollouts"), 'column "sampled"', "2 columns of that name");

  await writeRaw(path, editedTable((_, cols) => delete cols.logprobs));
  await assertUserError(
    () => readStageFile(path, "rollouts"),
    path,
    'column "logprobs"',
    "missing",
    "List<Float32>",
    "re-run stage rollout",
  );

  await writeRaw(
    path,
    editedTable((_, cols) => (cols.prompt_len = vectorFromArray([1, 2, 3], new Float64()))),
  );
  await assertUserError(
    () => readStageFile(path, "rollouts"),
    'column "prompt_len"',
    "expected type Int32, actual Float64",
  );

  await writeRaw(path, editedTable((meta) => meta.delete("kind")));
  await assertUserError(() => readStageFile(path, "rollouts"), path, '"kind"');
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a writer killed mid-write leaves the old file and its manifest intact", async () => {
  const { dir, path } = await goodFile();
  const before = await readStageFile(path, "rollouts");
  const writer = await startSlowWriter(path, 40000, "data", "writing");
  await writer.kill();
  assert.ok((await tempFiles(dir)).length > 0, "the writer was killed while writing its temporary file");
  const after = await readStageFile(path, "rollouts");
  assert.equal(after.rows, 50);
  assert.equal(after.sha256, before.sha256);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a writer killed mid-write with no old file leaves no file and no manifest", async () => {
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  const writer = await startSlowWriter(path, 40000, "data", "writing");
  await writer.kill();
  assert.equal(await exists(path), false);
  assert.equal(await exists(manifestPath(path)), false);
  await assertUserError(() => readStageFile(path, "rollouts"), path, "does not exist");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a writer killed between the data rename and the manifest leaves no stale manifest", async () => {
  const { dir, path } = await goodFile();
  const writer = await startSlowWriter(path, 20, "manifest", "renamed");
  await writer.kill();
  assert.equal(await exists(manifestPath(path)), false);
  await assertUserError(() => readStageFile(path, "rollouts"), path, "manifest", "not completely written");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("vectors in several chunks (files written elsewhere) are merged into one batch", async () => {
  const dir = await tempDir();
  const path = join(dir, "rollouts.arrow");
  const a = buildTable("x", "rollouts", rolloutColumns(5), SAMPLE_META);
  const b = buildTable("x", "rollouts", rolloutColumns(3), SAMPLE_META);
  const cols: Record<string, ColumnInput> = {};
  for (const f of a.schema.fields) cols[f.name] = a.getChild(f.name)!.concat(b.getChild(f.name)!);
  assert.equal((cols.tokens as Vector).data.length, 2);
  await writeStageFile(path, "rollouts", cols, SAMPLE_META);
  const file = await readStageFile(path, "rollouts");
  assert.equal(file.rows, 8);
  assert.equal(file.table.batches.length, 1);
  assert.deepEqual(file.listAt("tokens", 7), Int32Array.from([151646, 151647]));
  assert.deepEqual(file.listAt("tokens", 3), Int32Array.from([151647, 151648, 151649]));
  assert.deepEqual(file.listAt("tokens", 5), new Int32Array(0));
  assert.equal(file.column("episode_id")[6], "ep-1");
  assert.equal((file.column("tool_calls")[6] as { output: string }[])[0].output, "2 ✅");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a reward_<name> column of the wrong type is refused on read", async () => {
  const dir = await tempDir();
  const path = join(dir, "scored.arrow");
  const table = editedTable(
    (_, cols) => (cols.reward_format = vectorFromArray([1, 2, 3], new Float64())),
    "scored",
  );
  await writeRaw(path, table, "scored");
  await assertUserError(
    () => readStageFile(path, "scored"),
    path,
    'column "reward_format"',
    "expected type Float32, actual Float64",
    "re-run stage score",
  );
  await Deno.remove(dir, { recursive: true });
});
