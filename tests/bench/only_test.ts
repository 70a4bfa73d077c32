/**
 * `deno task bench --only`: a comma-separated list that may repeat; an unknown section is refused,
 * listing the valid ones, before anything runs (it used to run nothing and exit 0). bench/only.ts.
 * The algorithms comparison runs only when named, and its flags are checked before anything runs.
 */

import assert from "node:assert/strict";
import { BENCH_SECTIONS, ON_REQUEST, parseOnly } from "../../bench/only.ts";
import { UserError } from "../../lib/errors.ts";
import { assertRefused, command } from "../helpers/commands.ts";

Deno.test("bench --only takes a comma list, may repeat, and refuses unknown names listing the valid ones", async () => {
  assert.deepEqual([...parseOnly(["rollout,score_mask"])].sort(), ["rollout", "score_mask"]);
  assert.deepEqual([...parseOnly(["train", "engine"])].sort(), ["engine", "train"]);
  assert.deepEqual([...parseOnly([])], BENCH_SECTIONS.filter((s) => !ON_REQUEST.includes(s)));
  assert.ok(!parseOnly([]).has("algorithms"), "the hour-long comparison runs only when named");
  assert.ok(parseOnly(["algorithms"]).has("algorithms"));
  assert.ok(!parseOnly([]).has("gpu") && parseOnly(["gpu"]).has("gpu"), "gpu only when asked for");
  assert.throws(
    () => parseOnly(["rollout,bogus"]),
    (e) => e instanceof UserError && /"bogus"/.test(e.message),
  );
  assert.throws(() => parseOnly([","]), UserError);
  const r = await command("bench/bench.ts", ["--only", "rollout,scoremask"]);
  assertRefused(r, new RegExp(`--only \\(got "scoremask"\\).*${BENCH_SECTIONS.join(", ")}`));
  assertRefused(await command("bench/bench.ts", ["--bogus"]), /unknown flag --bogus/);
});

Deno.test("bench --only algorithms refuses bad --seeds, --algorithms and overrides before anything runs", async () => {
  assertRefused(
    await command("bench/bench.ts", ["--only", "algorithms", "--seeds", "0"]),
    /--seeds \(got 0\)/,
  );
  assertRefused(
    await command("bench/bench.ts", ["--only", "algorithms", "--algorithms", "grpo,ppp"]),
    /--algorithms \(got "ppp"\).*grpo, dr_grpo, rloo, mt_grpo, mt_grpo_turns, ppo/,
  );
  assertRefused(
    await command("bench/bench.ts", ["--only", "algorithms", "--loop.stepz=2"]),
    /loop\.stepz/,
  );
});
