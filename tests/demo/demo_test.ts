/**
 * The demo's wiring (lib/demo/run.ts) on a shortened schedule and a tiny model: it builds the model,
 * warm-starts it (probes included), runs GRPO steps of the loop from that adapter, and reports held-out
 * accuracy, calculator use and successful calls before and after. The figures it reports are checked
 * against a fresh evaluation of the adapters themselves (the warm start's and the last step's) on the
 * held-out tasks — not against the files the demo read — so a summary taken from the wrong step, the
 * wrong column or the wrong adapter fails. Whether the full demo learns is measured by running it
 * (`deno task bench --only demo_seeds`; BENCH.md).
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../../lib/config/mod.ts";
import {
  countsByValue,
  countsText,
  demoPoint,
  outcomeLine,
  readDemoSummary,
  readWarmStartRecord,
  summaryLines,
} from "../../lib/demo/result.ts";
import type { DemoPoint, DemoSummary } from "../../lib/demo/result.ts";
import { demo } from "../../lib/demo/run.ts";
import { writeStageFile } from "../../lib/arrow/write.ts";
import { evaluate, openSession } from "../../lib/pipeline/mod.ts";
import { RunLayout } from "../../lib/run/layout.ts";
import type { Config } from "../../lib/config/schema.ts";
import { evalColumns, SAMPLE_META } from "../fixtures/arrow_samples.ts";
import { fileURLToPath } from "node:url";

const DEMO_CONFIG = fileURLToPath(new URL("../../configs/demo.yaml", import.meta.url));

/** Held-out accuracy, calculator use and successful calls of `adapter`, evaluated afresh. */
async function evaluateAdapter(config: Config, hash: string, adapter: string, step: number) {
  const session = openSession(config, hash, { adapter, showProgress: false });
  try {
    const { summary, table } = await evaluate(session, { step });
    const ok = Array.from(table.getChild("tool_calls_ok")!.toArray() as Int16Array);
    return {
      accuracy: summary.accuracy,
      toolUse: summary.tool_use_rate,
      callsOk: ok.reduce((a, b) => a + b, 0) / ok.length,
      callsOkEpisodes: countsByValue(ok),
      episodes: summary.episodes,
    };
  } finally {
    await session.close();
  }
}

function figures(p: DemoPoint) {
  const { accuracy, toolUse, callsOk, callsOkEpisodes, episodes } = p;
  return { accuracy, toolUse, callsOk, callsOkEpisodes, episodes };
}

Deno.test("the demo reports the figures of its warm-start and final adapters, and its seed", async () => {
  const dir = await Deno.makeTempDir({ prefix: "demo-" });
  const { config, hash } = await loadConfig({
    file: DEMO_CONFIG,
    overrides: [
      ["model.path", join(dir, "model")],
      ["loop.run_dir", join(dir, "run")],
      ["loop.steps", "2"],
      ["loop.eval_every", "2"],
      ["eval.num_tasks", "8"],
      ["data.arithmetic.num_tasks", "48"],
      ["rollout.tasks_per_step", "2"],
      ["rollout.group_size", "2"],
      ["train.seed", "7"],
      ["rollout.generation.seed", "4"],
      ["demo.model.layers", "1"],
      ["demo.model.hidden", "64"],
      ["demo.model.heads", "4"],
      ["demo.model.kv_heads", "2"],
      ["demo.model.head_dim", "16"],
      ["demo.model.intermediate", "64"],
      ["demo.warm_start.traces", "16"],
      ["demo.warm_start.copy_max_steps", "80"],
      ["demo.warm_start.probe_every", "40"],
      ["demo.warm_start.probe_tasks", "4"],
      ["demo.warm_start.mix_steps", "2"],
      ["demo.warm_start.warmup_steps", "0"],
      ["demo.warm_start.lr", "0.03"],
    ],
  });
  for (let run = 0; run < 2; run++) { // the second replaces the first's model and run
    const r = await demo(config, hash);
    assert.equal(r.before.step, 0);
    assert.equal(r.after.step, 2);
    const layout = new RunLayout(config.loop.run_dir);
    assert.deepEqual(
      figures(r.before),
      await evaluateAdapter(config, hash, join(dir, "run", "warm", "adapter"), 0),
    );
    assert.deepEqual(figures(r.after), await evaluateAdapter(config, hash, layout.adapter(2), 2));
    assert.deepEqual(r.warmStart.seeds, { train: 7, rollout: 4, model: 7, warmStart: 7 });
    assert.deepEqual(await readWarmStartRecord(config.loop.run_dir), r.warmStart);
    assert.deepEqual(await readDemoSummary(config.loop.run_dir), r);
    assert.ok(r.cpuSeconds > 0 && r.seconds > 0);
    assert.equal(r.warmStart.copySteps, 80);
    // The start check: the mix phase went on, probe_every steps at a time, while the greedy policy called
    // the calculator on more than half the probe tasks (this tiny model does after its copy phase).
    const extra = r.warmStart.extraMixSteps;
    assert.deepEqual(r.warmStart.probes.map((p) => p.step), [40, 80, 82 + extra]);
    assert.deepEqual(
      r.warmStart.startProbes.map((p) => p.step),
      Array.from({ length: extra / 40 + 1 }, (_, k) => 82 + 40 * k),
    );
    assert.ok(r.warmStart.startProbes.slice(0, -1).every((p) => p.toolUse > 0.5));
    assert.ok(r.warmStart.startProbes.at(-1)!.toolUse <= 0.5 || extra === 1500);
    const lines = summaryLines({ train: 7, rollout: 4 }, r);
    assert.match(lines[0], /^seed 7 \(train\.seed; rollout\.generation\.seed 4\)$/);
    assert.ok(lines[1].includes(`${(100 * r.before.accuracy).toFixed(1)}% after the warm start`), lines[1]);
    assert.ok((await Deno.stat(r.report)).isFile);
  }
});

Deno.test("demoPoint reads held-out accuracy, calculator use and successful calls from an eval file", async () => {
  const dir = await Deno.makeTempDir({ prefix: "demo-point-" });
  const columns = evalColumns(12); // correct on odd rows; i % 3 successful calls, used_tool when > 0
  await Deno.mkdir(join(dir, "eval"));
  await writeStageFile(new RunLayout(dir).eval(3), "eval", columns, SAMPLE_META);
  assert.deepEqual(await demoPoint(dir, 3), {
    step: 3,
    accuracy: 0.5,
    toolUse: 8 / 12,
    callsOk: 1,
    callsOkEpisodes: [4, 4, 4],
    episodes: 12,
  });
  await assert.rejects(() => demoPoint(dir, 0)); // no eval file of step 0
});

Deno.test("countsByValue counts episodes by successful calls; countsText names the counts that occur", () => {
  assert.deepEqual(countsByValue([2, 2, 3, 1, 2]), [0, 1, 3, 1]);
  assert.deepEqual(countsByValue([]), []);
  assert.equal(countsText([0, 1, 191, 8]), "1: 1, 2: 191, 3: 8");
  assert.equal(countsText([]), "");
});

Deno.test("the closing line names the ceiling the warm start met, and says when it left little room", () => {
  const point = (step: number, accuracy: number): DemoPoint => ({
    step,
    accuracy,
    toolUse: 1,
    callsOk: 1,
    callsOkEpisodes: [0, 200],
    episodes: 200,
  });
  const summary = (before: number, after: number, ceiling: number): DemoSummary => ({
    before: point(0, before),
    after: point(20, after),
    warmStart: {
      seeds: { train: 1, rollout: 1, model: 1, warmStart: 1 },
      copySteps: 800,
      mixSteps: 300,
      extraMixSteps: 0,
      startProbes: [{ step: 1100, accuracy: 0.1, toolUse: 0, callsOk: 0 }],
      probes: [{ step: 800, accuracy: 0.5, toolUse: 1, callsOk: 1 }, {
        step: 1100,
        accuracy: ceiling,
        toolUse: 1,
        callsOk: 1,
      }],
      modelSeconds: 1,
      warmStartSeconds: 1,
    },
    report: "r.html",
    seconds: 1,
    cpuSeconds: 1,
  });
  const strong = outcomeLine(summary(0.87, 0.81, 0.92));
  assert.match(strong, /little room: it answered 87\.0%/);
  assert.match(strong, /reaches 92\.0% with every call made/);
  assert.match(strong, /GRPO ended at 81\.0% \(-6\.0 points\)/);
  const weak = outcomeLine(summary(0.07, 0.74, 0.92));
  assert.doesNotMatch(weak, /little room/);
  assert.match(weak, /^outcome: \+67\.0 points, ending at 74\.0%; the warm start's copying reaches 92\.0%/);
  assert.ok(summaryLines({ train: 1, rollout: 1 }, summary(0.87, 0.81, 0.92)).includes(strong));
});
