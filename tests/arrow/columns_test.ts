/**
 * Numeric list columns as flat values plus offsets (lib/arrow/columns.ts): a sliced column (Arrow JS's
 * `slice`, as dynamic sampling cuts kept groups out of a step's files) reads back its own rows.
 */

import assert from "node:assert/strict";
import { Field, Int32, List, vectorFromArray } from "apache-arrow";
import { flatOfVector } from "../../lib/arrow/columns.ts";

Deno.test("flatOfVector reads a sliced list column's rows, not the rows after them", () => {
  const column = vectorFromArray([[1, 2], [3], [4, 5, 6], [7]], new List(new Field("item", new Int32())));
  const flat = flatOfVector(column.slice(2, 4))!;
  assert.deepEqual(Array.from(flat.values), [4, 5, 6, 7]);
  assert.deepEqual(Array.from(flat.offsets), [0, 3, 4]);
  const middle = flatOfVector(column.slice(1, 3))!;
  assert.deepEqual(Array.from(middle.values), [3, 4, 5, 6]);
  assert.deepEqual(Array.from(middle.offsets), [0, 1, 4]);
});
