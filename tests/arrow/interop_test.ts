/**
 * Our stage files read by readers we did not write (tests/helpers/interop.ts): Rust Polars through
 * `npm:nodejs-polars` and `npm:@uwdata/flechette`. A rollouts file and the run's metrics.arrow
 * (run_metrics) from a fixture run must come back with the declared column types and our values, as
 * they would in `pl.read_ipc(...)` or `pyarrow.ipc.open_file(...)` (docs/runs.md).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile, resolveKind } from "../../lib/arrow/mod.ts";
import { makeRunDir } from "../fixtures/run_dir.ts";
import { type ForeignTable, readWithFlechette, readWithPolars } from "../helpers/interop.ts";

const TOOL_CALL_FIELDS = ["turn", "name", "arguments", "status", "output", "ms"];

/** Expected types of the rollouts columns, in each reader's names. */
const ROLLOUT_TYPES = {
  polars: {
    episode_id: "String",
    group_id: "Int32",
    tokens: "List(Int32)",
    prompt_len: "Int32",
    sampled: "List(UInt8)",
    logprobs: "List(Float32)",
    turn_idx: "List(Int16)",
    num_turns: "Int16",
    tool_calls: 'List(Struct(Field("turn", Int16),Field("name", String),Field("arguments", String),' +
      'Field("status", String),Field("output", String),Field("ms", Float32)))',
  },
  flechette: {
    episode_id: "Utf8",
    group_id: "Int32",
    tokens: "List<Int32>",
    prompt_len: "Int32",
    sampled: "List<Uint8>",
    logprobs: "List<Float32>",
    turn_idx: "List<Int16>",
    num_turns: "Int16",
    tool_calls: "List<Struct<{turn:Int16, name:Utf8, arguments:Utf8, status:Utf8, output:Utf8, ms:Float32}>>",
  },
};

const READERS: Array<[keyof typeof ROLLOUT_TYPES, (path: string) => Promise<ForeignTable>]> = [
  ["polars", readWithPolars],
  ["flechette", readWithFlechette],
];

const runDir = makeRunDir({ steps: 2 });

for (const [reader, read] of READERS) {
  Deno.test(`${reader} reads a rollouts file with our column types and values`, async () => {
    const path = join(await runDir, "step-0002", "rollouts.arrow");
    const ours = await readStageFile(path, "rollouts");
    const theirs = await read(path);
    assert.equal(theirs.rows, ours.rows);
    assert.deepEqual(Object.keys(theirs.types), ours.columnNames);
    for (const [name, type] of Object.entries(ROLLOUT_TYPES[reader])) {
      assert.equal(theirs.types[name], type, name);
    }
    for (const name of ["episode_id", "messages", "status", "group_id", "prompt_len", "num_turns"]) {
      assert.deepEqual(theirs.column(name), ours.column(name), name);
    }
    for (const name of ["tokens", "sampled", "turn_idx", "logprobs"]) {
      const expected = ours.column(name).map((row) => Array.from(row as ArrayLike<number>));
      assert.deepEqual(theirs.column(name), expected, name);
    }
    const calls = theirs.column("tool_calls") as Array<Array<Record<string, unknown>>>;
    const expected = ours.column("tool_calls") as Array<Array<Record<string, unknown>>>;
    assert.ok(expected.some((c) => c.length > 0) && expected.some((c) => c.length === 0), "fixture has both");
    calls.forEach((row, i) => {
      assert.equal(row.length, expected[i].length);
      row.forEach((call, k) => {
        assert.deepEqual(Object.keys(call), TOOL_CALL_FIELDS);
        assert.deepEqual(call, expected[i][k]);
      });
    });
  });

  Deno.test(`${reader} reads the run's metrics.arrow: step Int32, every metric Float64`, async () => {
    const path = join(await runDir, "metrics.arrow");
    const ours = await readStageFile(path, "run_metrics");
    const theirs = await read(path);
    assert.equal(theirs.rows, 2);
    assert.equal(theirs.types.step, "Int32");
    for (const c of resolveKind("run_metrics").columns.slice(1)) {
      assert.equal(theirs.types[c.name], "Float64", c.name);
    }
    assert.equal(theirs.types.tool_status_ok, "Float64");
    assert.deepEqual(theirs.column("step"), [1, 2]);
    for (const name of ["reward_mean", "accuracy", "tool_status_ok", "tool_status_invalid_tool_call"]) {
      assert.deepEqual(theirs.column(name), ours.column(name), name);
    }
  });
}
