/**
 * Corrupt stage files whose manifest matches (edited bytes, manifest rewritten; or a file from another
 * program with a manifest written for it): the reader validates every declared column's body before
 * use and refuses each one with a one-line UserError naming the file, the column and what is wrong
 * (docs/RELIABILITY.md, "Corrupt input and a full disk").
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { Table } from "apache-arrow";
import {
  buildTable,
  type ColumnInput,
  listFromArrays,
  readStageFile,
  StageFile,
  type StageKind,
} from "../../lib/arrow/mod.ts";
import { assertUserError, tempDir, writeRaw } from "../fixtures/arrow_helpers.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import {
  buffersVectorAt,
  columnLayout,
  corruptFile,
  PER_TOKEN,
  setListOffsets,
} from "../fixtures/arrow_corrupt.ts";

const ROWS = 8;

/** A well-formed batch file of ROWS rows (row i has i % 4 tokens) in a fresh directory. */
async function batchFile(columns: Partial<Record<string, ColumnInput>> = {}): Promise<string> {
  const path = join(await tempDir(), "batch.arrow");
  const table = buildTable(
    path,
    "batch",
    { ...sampleColumns("batch", ROWS), ...columns } as never,
    SAMPLE_META,
  );
  await writeRaw(path, table, "batch");
  return path;
}

/** Reads `path` as a batch file and expects a UserError naming it, `column` and every fragment. */
async function refused(path: string, column: string, ...fragments: string[]): Promise<string> {
  return await assertUserError(
    () => readStageFile(path, "batch" as StageKind),
    path,
    `column "${column}"`,
    ...fragments,
  );
}

Deno.test("list offsets past the values, the same in every per-token column, are refused", async () => {
  const path = await batchFile();
  await corruptFile(
    path,
    (b, v) => setListOffsets(b, v, PER_TOKEN, ROWS, (i) => (i === ROWS ? 2 ** 31 - 1 : 0)),
  );
  await refused(path, "tokens", "offset", "2147483647");
});

Deno.test("list offsets that go down (each row a huge range) are refused before any row is read", async () => {
  const path = await batchFile();
  await corruptFile(path, (b, v) => setListOffsets(b, v, PER_TOKEN, ROWS, (i) => (i % 2 ? 2 ** 31 - 1 : 0)));
  await refused(path, "tokens", "row 1");
});

Deno.test("list offsets inside the values but out of order are refused", async () => {
  const path = await batchFile();
  // Row 1 ends past row 2's end: within the buffer, so only the order shows the damage.
  await corruptFile(path, (b, v) => setListOffsets(b, v, PER_TOKEN, 2, (i) => (i === 1 ? 5 : 1)));
  await refused(path, "tokens", "offsets go down");
});

Deno.test("a column whose length differs from the row count is refused", async () => {
  const path = await batchFile();
  await corruptFile(path, (b, v) => v.setBigInt64(columnLayout(b, "group_id").nodes[0], 1000n, true));
  await refused(path, "group_id", "1000", `${ROWS} rows`);
});

Deno.test("a list child shorter than its last offset is refused", async () => {
  const path = await batchFile();
  await corruptFile(path, (b, v) => v.setBigInt64(columnLayout(b, "advantages").nodes[1], 2n, true));
  await refused(path, "advantages", "2 values");
});

Deno.test("a values buffer shorter than its column is refused", async () => {
  const path = await batchFile();
  await corruptFile(path, (b, v) => {
    const at = buffersVectorAt(b) + 16 * (columnLayout(b, "reward").firstBuffer + 1);
    v.setBigInt64(at + 8, 8n, true); // 8 bytes: two Float32 values for 8 rows
  });
  await refused(path, "reward", "buffer");
});

Deno.test("a null count in a column declared without nulls is refused", async () => {
  const path = await batchFile();
  await corruptFile(path, (b, v) => v.setBigInt64(columnLayout(b, "reward").nodes[0] + 8, 3n, true));
  await refused(path, "reward", "null");
});

Deno.test("text that is not valid UTF-8 is refused", async () => {
  const path = await batchFile();
  await corruptFile(path, (b) => (b[columnLayout(b, "messages").buffers[2].at + 3] = 0xff));
  await refused(path, "messages", "UTF-8", "row 0");
});

Deno.test("string offsets past the text are refused", async () => {
  const path = await batchFile();
  await corruptFile(
    path,
    (b, v) => v.setInt32(columnLayout(b, "episode_id").buffers[1].at + 4 * ROWS, 1 << 30, true),
  );
  await refused(path, "episode_id", "offset");
});

Deno.test("values outside a column's meaning are refused: token ids, flags, prompt_len, non-finite numbers", async () => {
  const rows = (f: (i: number) => number[]) => Array.from({ length: ROWS }, (_, i) => f(i));
  const ones = (i: number) => Array.from({ length: i % 4 }, () => 1);
  const cases: Array<[Partial<Record<string, ColumnInput>>, string, string[]]> = [
    [{ tokens: listFromArrays(rows((i) => ones(i).map(() => (i === 3 ? -7 : 5))), Int32Array) }, "tokens", [
      "row 3",
      "-7",
    ]],
    [{ sampled: listFromArrays(rows((i) => ones(i).map(() => 2)), Uint8Array) }, "sampled", [
      "row 1",
      "0 or 1",
    ]],
    [{ loss_mask: listFromArrays(rows((i) => ones(i).map(() => 9)), Uint8Array) }, "loss_mask", ["0 or 1"]],
    [{ prompt_len: Int32Array.from(rows((i) => [i % 4 + 1]).flat()) }, "prompt_len", ["row 0", "tokens"]],
    [{ prompt_len: Int32Array.from(rows(() => [-1]).flat()) }, "prompt_len", ["-1"]],
    [{ turn_idx: listFromArrays(rows((i) => ones(i).map(() => -2)), Int16Array) }, "turn_idx", ["-2"]],
    [{ advantages: listFromArrays(rows((i) => ones(i).map(() => NaN)), Float32Array) }, "advantages", [
      "NaN",
    ]],
    [{ logprobs: listFromArrays(rows((i) => ones(i).map(() => -Infinity)), Float32Array) }, "logprobs", [
      "Infinity",
    ]],
  ];
  for (const [columns, column, fragments] of cases) {
    await refused(await batchFile(columns), column, ...fragments);
  }
});

Deno.test("a per-token list whose length differs from its row's tokens is refused, naming the row", async () => {
  const short = listFromArrays(
    Array.from({ length: ROWS }, (_, i) => new Uint8Array(i === 2 ? 1 : i % 4)),
    Uint8Array,
  );
  await refused(await batchFile({ sampled: short }), "sampled", "row 2", "1 entries", "2 tokens");
});

Deno.test("a buffer region outside the record batch body is refused", async () => {
  const path = await batchFile();
  await corruptFile(path, (b, v) => {
    const at = buffersVectorAt(b) + 16 * columnLayout(b, "tokens").firstBuffer + 16;
    v.setBigInt64(at, 1n << 40n, true);
  });
  await assertUserError(() => readStageFile(path, "batch"), path, "buffer", "outside");
});

Deno.test("a well-formed file of every kind still reads after validation (rows and values unchanged)", async () => {
  for (const kind of ["rollouts", "scored", "batch", "metrics", "eval", "run_metrics"] as const) {
    const path = join(await tempDir(), `${kind}.arrow`);
    const table = buildTable(path, kind, sampleColumns(kind, ROWS), SAMPLE_META);
    await writeRaw(path, table, kind);
    const file = await readStageFile(path, kind);
    assert.equal(file.rows, ROWS);
    for (const name of file.columnNames) {
      assert.deepEqual(file.column(name), new StageFile(path, kind, table, file.metadata, "").column(name));
    }
    // A file with no record batch at all (other writers make those for empty tables) is 0 rows.
    await writeRaw(path, new Table(table.schema), kind);
    const empty = await readStageFile(path, kind);
    assert.equal(empty.rows, 0);
    for (const name of empty.columnNames) assert.deepEqual(empty.column(name), [], name);
  }
});
