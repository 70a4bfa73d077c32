/**
 * `deno task bench --only`: a comma-separated list that may repeat; an unknown section is refused,
 * listing the valid ones, before anything runs (it used to run nothing and exit 0). bench/only.ts.
 */

import assert from "node:assert/strict";
import { BENCH_SECTIONS, parseOnly } from "../../bench/only.ts";
import { UserError } from "../../lib/errors.ts";
import { assertRefused, command } from "../helpers/commands.ts";

Deno.test("bench --only takes a comma list, may repeat, and refuses unknown names listing the valid ones", async () => {
  assert.deepEqual([...parseOnly(["rollout,score_mask"])].sort(), ["rollout", "score_mask"]);
  assert.deepEqual([...parseOnly(["train", "engine"])].sort(), ["engine", "train"]);
  assert.deepEqual([...parseOnly([])], [...BENCH_SECTIONS]);
  assert.throws(
    () => parseOnly(["rollout,bogus"]),
    (e) => e instanceof UserError && /"bogus"/.test(e.message),
  );
  assert.throws(() => parseOnly([","]), UserError);
  const r = await command("bench/bench.ts", ["--only", "rollout,scoremask"]);
  assertRefused(r, new RegExp(`--only \\(got "scoremask"\\).*${BENCH_SECTIONS.join(", ")}`));
  assertRefused(await command("bench/bench.ts", ["--bogus"]), /unknown flag --bogus/);
});
