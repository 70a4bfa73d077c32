/**
 * The comparison page (`deno task report RUN_A RUN_B … --out FILE`, lib/report/compare.ts) on run
 * directories made by code: one line per run in every chart, held-out accuracy and tool use from each
 * run's eval files, and, when runs are grouped as `<group>/<run>`, each group's mean over its runs;
 * several runs without `--out` are refused in one line; the page has no scripts or network references.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { curvesOf, groupsOf, meanCurves, runLabels } from "../../lib/report/compare.ts";
import { loadRunData } from "../../lib/report/mod.ts";
import { makeRunDir } from "../fixtures/run_dir.ts";
import { denoRunArgs } from "../helpers/commands.ts";

/** Run directories under one tree: `<root>/<group>/<name>` for each of `names`. */
async function runTree(names: string[]): Promise<string[]> {
  const root = await Deno.makeTempDir({ prefix: "compare-" });
  const out: string[] = [];
  for (const [i, name] of names.entries()) {
    const made = await makeRunDir({ steps: 2 + i % 2, evalSteps: [0, 2] });
    const to = join(root, name);
    await Deno.mkdir(join(to, ".."), { recursive: true });
    await Deno.rename(made, to);
    out.push(to);
  }
  return out;
}

function report(...args: string[]) {
  return new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs("stages/report.ts"), ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
}

Deno.test("report RUN_A RUN_B … --out draws every run and each group's mean on one page", async () => {
  const runs = await runTree(["grpo/seed-1", "grpo/seed-2", "ppo/seed-1", "ppo/seed-2"]);
  assert.deepEqual(runLabels(runs), ["grpo/seed-1", "grpo/seed-2", "ppo/seed-1", "ppo/seed-2"]);
  const out = join(runs[0], "..", "..", "compare.html");
  const done = await report(...runs, "--out", out);
  assert.equal(done.code, 0, new TextDecoder().decode(done.stderr));
  const html = await Deno.readTextFile(out);
  for (const scope of ["group", "run"]) {
    for (const chart of ["heldout_accuracy", "heldout_tool_use", "reward", "tool_success", "tool_calls"]) {
      assert.match(html, new RegExp(`data-chart="${scope}-${chart}"`), `${scope} ${chart}`);
    }
  }
  const runChart = html.split('data-chart="run-heldout_accuracy">')[1].split("</figure>")[0];
  assert.equal(runChart.split('<path d="M').length - 1, 4, "one held-out line per run");
  const groupChart = html.split('data-chart="group-heldout_accuracy">')[1].split("</figure>")[0];
  assert.equal(groupChart.split('<path d="M').length - 1, 2, "one line per group");
  assert.match(html, /grpo \(mean of 2\)/);
  assert.doesNotMatch(html, /https?:\/\/|<script|src=/i, "no network references, no scripts");

  const refused = await report(runs[0], runs[1]);
  assert.equal(refused.code, 2);
  const err = new TextDecoder().decode(refused.stderr).trim();
  assert.equal(err.split("\n").length, 1, err);
  assert.match(err, /several run directories.*--out/);
});

Deno.test("group means average the runs' values at the steps they share", async () => {
  const runs = await runTree(["a/1", "a/2", "b/1"]);
  const labels = runLabels(runs);
  const curves = await Promise.all(runs.map(async (r, i) => curvesOf(await loadRunData(r), labels[i])));
  const mean = meanCurves("a", curves.slice(0, 2));
  assert.deepEqual(mean.steps, [1, 2], "steps both runs have (the second has a third)");
  mean.steps.forEach((_, k) => {
    const want = (curves[0].rewardMean[k] + curves[1].rewardMean[k]) / 2;
    assert.ok(Math.abs(mean.rewardMean[k] - want) < 1e-12);
  });
  assert.deepEqual(mean.evalSteps, [0, 2]);
  const groups = groupsOf(curves);
  assert.deepEqual(groups.map((g) => g.label), ["a (mean of 2)"], "a group of one is not averaged");
});
