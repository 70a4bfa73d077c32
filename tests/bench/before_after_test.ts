/**
 * `deno task bench --before REV`: an older revision checked out beside this one (bench/checkout.ts) and
 * measured against the same peer figure in every round (bench/before_after.ts).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import {
  beforeAfterRounds,
  type BeforeAfterRunner,
  beforeAfterTables,
  type Json,
} from "../../bench/before_after.ts";
import { beforeCommits, checkoutBefore } from "../../bench/checkout.ts";
import { UserError } from "../../lib/errors.ts";
import { assertRefused, command } from "../helpers/commands.ts";

/**
 * The figures of rounds 1 to 3 that change between rounds, in no order, so that each column's median
 * comes from another round (a median taken as one middle round's row would not pass).
 */
const PEER_BATCH1 = [400, 200, 600];
const BEFORE_BATCH8 = [1200, 1000, 1100];

/** A runner whose figures are given per side and round; it records every call in order. */
function fakeRunner(calls: string[]): BeforeAfterRunner {
  let round = 0;
  const decode = (side: string) => side === "after" ? [400, 2000] : [300, BEFORE_BATCH8[round]];
  return {
    after: "/after",
    before: "/before",
    engineArgs: ["--model=m"],
    trainArgs: ["--model=m"],
    trainAfterOnly: ["--write-batch=b.json"],
    script: (root: string, script: string, args: string[]): Promise<Json> => {
      const side = root === "/after" ? "after" : "before";
      calls.push(`${side} ${script} ${args.join(" ")}`);
      if (script === "engine_bench.ts") {
        const [b1, b8] = decode(side);
        return Promise.resolve({
          batches: [{ batch: 1, decode_tok_per_s: b1 }, { batch: 8, decode_tok_per_s: b8 }],
        });
      }
      const seconds = side === "after" ? 0.2 : 0.25;
      return Promise.resolve({ seconds_per_step: seconds, tok_per_s: 512 / seconds, tokens_per_step: 512 });
    },
    decodePeer: () => {
      calls.push("transformers.js");
      round++; // the peer closes a round's engine section
      return Promise.resolve([
        { batch: 1, decodeTokensPerSecond: PEER_BATCH1[round - 1] },
        { batch: 8, decodeTokensPerSecond: 1000 },
      ]);
    },
    trainPeer: () => {
      calls.push("pytorch");
      return Promise.resolve({ seconds_per_step: 2, tok_per_s: 256 });
    },
  };
}

Deno.test("before/after rounds alternate the order, run the peer once per round, and give after-only flags to this checkout", async () => {
  const calls: string[] = [];
  const rounds = await beforeAfterRounds(fakeRunner(calls), 2, { engine: true, train: true }, () => {});
  assert.deepEqual(calls, [
    "before engine_bench.ts --model=m",
    "after engine_bench.ts --model=m",
    "transformers.js",
    "before train_bench.ts --model=m",
    "after train_bench.ts --model=m --write-batch=b.json",
    "pytorch",
    "after engine_bench.ts --model=m",
    "before engine_bench.ts --model=m",
    "transformers.js",
    "after train_bench.ts --model=m --write-batch=b.json",
    "before train_bench.ts --model=m",
    "pytorch",
  ]);
  assert.deepEqual(rounds.map((r) => r.order), [["before", "after"], ["after", "before"]]);
});

Deno.test("before/after tables divide both sides of a round by that round's peer, and take medians over rounds", async () => {
  const rounds = await beforeAfterRounds(fakeRunner([]), 3, { engine: true, train: true }, () => {});
  const lines = beforeAfterTables("tiny", "abc+def", rounds);
  const row = (label: string, table: number) =>
    lines.filter((l) => l.startsWith(`| ${label}`))[table]?.split("|").slice(2, -1).map((c) => c.trim());
  // Round 2: peer 200 / 1000 tok/s; ours before 300 / 1,000, after 400 / 2,000.
  assert.deepEqual(row("2 (after, before)", 0), [
    "1.50 / 1.00",
    "2.00 / 2.00",
    "1.33 / 2.00",
    "300 / 1000",
    "400 / 2000",
    "200 / 1000",
  ]);
  // Medians over rounds of each column (of the rounds' ratios, not a ratio of medians): peers 400, 200, 600
  // at batch 1 give before 0.75, 1.5, 0.5 and after 1, 2, 0.67 (round 1's); before at batch 8 is 1,200,
  // 1,000, 1,100, so its ratio, after / before and tok/s take round 3's.
  assert.deepEqual(row("median", 0), [
    "0.75 / 1.10",
    "1.00 / 2.00",
    "1.33 / 1.82",
    "300 / 1100",
    "400 / 2000",
    "400 / 1000",
  ]);
  // Train: 512 tokens, 0.25 and 0.2 s against PyTorch's 2 s (256 tok/s).
  assert.deepEqual(row("median", 1), ["8.00", "10.00", "1.25", "0.250", "0.200", "2.000"]);
  // Geometric means: train after / before is 1.25 every round; decode at batch 8 is 2000 / (1200, 1000, 1100).
  assert.equal(row("geometric mean", 1)[2], "1.25");
  assert.equal(row("geometric mean", 0)[2], `1.33 / ${(2000 / Math.cbrt(1200 * 1000 * 1100)).toFixed(2)}`);
  assert.ok(lines.some((l) => l.includes("before (abc+def) and after, tiny")));
});

Deno.test("a round whose side failed shows a dash there and keeps the other figures", async () => {
  const runner = fakeRunner([]);
  const script = runner.script;
  runner.script = (root, name, args) =>
    root === "/before" && name === "train_bench.ts"
      ? Promise.resolve({ error: "boom" })
      : script(root, name, args);
  const rounds = await beforeAfterRounds(runner, 1, { engine: false, train: true }, () => {});
  const lines = beforeAfterTables("tiny", "abc", rounds);
  assert.equal(lines.filter((l) => l.startsWith("### Decode")).length, 0, "no engine table when not asked");
  const cells = lines.find((l) => l.startsWith("| 1 (before, after)"))!.split("|").slice(2, -1).map((c) =>
    c.trim()
  );
  assert.deepEqual(cells, ["–", "10.00", "–", "–", "0.200", "2.000"]);
});

async function git(cwd: string, ...args: string[]): Promise<string> {
  const out = await new Deno.Command("git", {
    args: ["-c", "user.name=t", "-c", "user.email=t@t", ...args],
    cwd,
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout).trim();
}

Deno.test("--before REV+FIX checks out REV with FIX's code applied uncommitted; a name that is no commit is refused", async () => {
  const root = await Deno.makeTempDir({ prefix: "checkout-test-" });
  try {
    await git(root, "init", "-q");
    const commit = async (file: string, text: string) => {
      await Deno.writeTextFile(join(root, file), text);
      await git(root, "add", file);
      await git(root, "commit", "-q", "-m", file);
      return await git(root, "rev-parse", "--short", "HEAD");
    };
    await Deno.writeTextFile(join(root, "deno.json"), "{}");
    await git(root, "add", "deno.json");
    const rev = await commit("a.txt", "old\n");
    await commit("a.txt", "new\n");
    await Deno.writeTextFile(join(root, "NOTES.md"), "a later line\n");
    await git(root, "add", "NOTES.md");
    const fix = await commit("fix.txt", "fixed\n");
    const dir = await checkoutBefore(root, `${rev}+${fix}`);
    assert.equal(dir, join(root, "runs", "bench", `before-${rev}_${fix}`));
    assert.equal(await Deno.readTextFile(join(dir, "a.txt")), "old\n", "REV's files");
    assert.equal(await Deno.readTextFile(join(dir, "fix.txt")), "fixed\n", "FIX's code applied");
    await assert.rejects(() => Deno.stat(join(dir, "NOTES.md")), Deno.errors.NotFound, "not FIX's Markdown");
    assert.equal(await git(dir, "rev-parse", "--short", "HEAD"), rev, "FIX left uncommitted");
    assert.equal((await Deno.lstat(join(dir, "node_modules"))).isSymlink, true);
    assert.equal(await checkoutBefore(root, `${rev}+${fix}`), dir, "reused");
    await assert.rejects(
      () => beforeCommits(root, `${rev}+nosuchcommit`),
      (e) =>
        e instanceof UserError &&
        /--before \(got ".*\+nosuchcommit"\).*"nosuchcommit" is not a commit/.test(e.message),
    );
    await assert.rejects(() => beforeCommits(root, "--help"), UserError, "no option smuggled into git");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("bench --before with an unknown revision is refused before anything runs", async () => {
  assertRefused(
    await command("bench/bench.ts", ["--only", "train", "--before", "nosuchrev123"]),
    /--before \(got "nosuchrev123"\).*not a commit of this repository/,
  );
});
