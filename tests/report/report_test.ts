/**
 * The run report (lib/report/, stages/report.ts) on run directories made by code
 * (fixtures/run_dir.ts): every chart and the eval points present, sampled tokens coloured by their
 * advantage, model output escaped, a one-step run without eval or tokenizer still rendered, the stage
 * writing RUN/report.html, and the page opening in headless Chromium without errors, charts drawn.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { Chromium } from "../../lib/report/chromium.ts";
import { renderReport } from "../../lib/report/mod.ts";
import { runName } from "../../lib/report/run_data.ts";
import { advantageColor } from "../../lib/report/trajectory.ts";
import { makeRunDir } from "../fixtures/run_dir.ts";
import { denoRunArgs } from "../helpers/commands.ts";

const CHARTS = [
  "reward",
  "accuracy",
  "kl",
  "clip_frac",
  "entropy",
  "response_tokens",
  "turns",
  "tool_status",
  "rollout_mismatch",
  "eval",
];

const count = (html: string, needle: string) => html.split(needle).length - 1;

Deno.test("the report has every per-step chart, the eval points and advantage-coloured tokens", async () => {
  const run = await makeRunDir({ steps: 3 });
  const html = await renderReport(run);
  for (const id of CHARTS) assert.match(html, new RegExp(`<figure class="chart" data-chart="${id}">`), id);
  const lines = count(html, '<path d="M');
  assert.ok(lines >= 6, `line charts are drawn: ${lines} lines`);
  assert.equal(lines, count(html, "<path d="), "every line has points");
  for (
    const id of ["reward", "accuracy", "kl", "clip_frac", "entropy", "response_tokens", "rollout_mismatch"]
  ) {
    const figure = html.split(`data-chart="${id}">`)[1].split("</figure>")[0];
    assert.match(figure, /<path d="M[\d.]+/, `chart ${id} has a line`);
  }
  assert.match(html, /<td>0<\/td><td>10<\/td>/, "eval at step 0 (before training), 10 episodes");
  assert.match(html, /<td>3<\/td><td>10<\/td>/, "eval at the last step");
  assert.match(html, /Trajectories of step-0003/);
  assert.ok(count(html, "rgba(0, 90, 255") > 3, "positive-advantage tokens are blue");
  assert.ok(count(html, "rgba(220, 40, 40") > 3, "negative-advantage tokens are red");
  assert.match(html, /title="token \d+ · advantage /, "each sampled token carries its id and advantage");
  assert.match(html, /class="status bad">invalid_tool_call</, "a failed tool call is shown with its status");
  assert.match(html, /error: the tool call is not valid JSON/, "…and its output");
  assert.doesNotMatch(html, /https?:\/\/|<script|src=/i, "no network references, no scripts");
});

Deno.test("model output is escaped: markup in a message appears as text, never as elements", async () => {
  const attack = `<script>alert(1)</script><img src=x onerror="alert(2)">"'&`;
  const run = await makeRunDir({ steps: 1, injectText: attack });
  const escaped =
    "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&quot;alert(2)&quot;&gt;&quot;&#39;&amp;";
  for (const opts of [{}, { decode: null }]) { // per-token spans, then the messages-text fallback
    const html = await renderReport(run, opts);
    assert.doesNotMatch(html, /<script|<img/i);
    const text = html.replace(/<span class="tok"[^>]*>|<\/span>/g, "");
    assert.ok(text.includes(escaped), "the markup is shown as text");
  }
});

Deno.test("a one-step run without eval and without its model directory still renders", async () => {
  const run = await makeRunDir({ steps: 1, evalSteps: [], tokenizer: false });
  const html = await renderReport(run);
  assert.match(html, /no eval files/);
  assert.match(html, /tokenizer not found: showing the messages text/);
  assert.match(html, /data-chart="reward">.*<circle/s, "a single step is drawn as a dot");
  assert.match(html, /Final answer: \d+/);
});

Deno.test("advantage colours: blue for positive, red for negative, none for 0 or NaN", () => {
  assert.equal(advantageColor(1, 1), "rgba(0, 90, 255, 0.70)");
  assert.equal(advantageColor(-0.5, 1), "rgba(220, 40, 40, 0.41)");
  assert.equal(advantageColor(0, 1), "transparent");
  assert.equal(advantageColor(NaN, 1), "transparent");
});

Deno.test("deno task report RUN writes RUN/report.html; a missing run is one line and exit 2", async () => {
  const run = await makeRunDir({ steps: 2 });
  const report = (...args: string[]) =>
    new Deno.Command(Deno.execPath(), {
      args: [...denoRunArgs("stages/report.ts"), ...args],
      stdout: "piped",
      stderr: "piped",
    }).output();
  const ok = await report(run);
  assert.equal(ok.code, 0, new TextDecoder().decode(ok.stderr));
  assert.match(await Deno.readTextFile(join(run, "report.html")), /<h1>Run runs\/fixture<\/h1>/);
  const bad = await report(join(run, "no-such-run"));
  assert.equal(bad.code, 2);
  const err = new TextDecoder().decode(bad.stderr).trim();
  assert.equal(err.split("\n").length, 1, err);
  assert.match(err, /run directory .*no-such-run: it does not exist/);
});

Deno.test("the report opens in headless Chromium with no errors and every chart drawn", async () => {
  const run = await makeRunDir({ steps: 3 });
  const file = join(run, "report.html");
  await Deno.writeTextFile(file, await renderReport(run));
  const probe = join(run, "probe.html");
  await Deno.writeTextFile(probe, `<!DOCTYPE html><script>console.error("probe")</script>`);
  const browser = await Chromium.launch();
  try {
    const page = await browser.open(pathToFileURL(file).href);
    assert.deepEqual(page.errors, []);
    const drawn = await page.evaluate<Array<{ id: string; w: number; h: number; marks: number }>>(
      `[...document.querySelectorAll("figure.chart")].map((f) => {
        const svg = f.querySelector("svg"); const box = svg ? svg.getBoundingClientRect() : { width: 0, height: 0 };
        return { id: f.dataset.chart, w: box.width, h: box.height,
                 marks: f.querySelectorAll("circle, rect").length };
      })`,
    );
    for (const id of CHARTS) {
      const chart = drawn.find((d) => d.id === id);
      assert.ok(
        chart && chart.w > 100 && chart.h > 100 && chart.marks > 0,
        `${id}: ${JSON.stringify(chart)}`,
      );
    }
    // The error collector itself works: a page that logs an error is caught.
    const bad = await browser.open(pathToFileURL(probe).href);
    assert.deepEqual(bad.errors, ["console.error: probe"]);
  } finally {
    await browser.close();
  }
});

Deno.test("the page names a run with its parent: runs/demo/run is 'Run demo/run', not 'Run run'", async () => {
  const fixture = await makeRunDir({ steps: 1 });
  const run = join(fixture, "..", "demo", "run");
  await Deno.mkdir(join(run, ".."), { recursive: true });
  await Deno.rename(fixture, run);
  const html = await renderReport(run);
  assert.match(html, /<title>Run demo\/run<\/title>/);
  assert.match(html, /<h1>Run demo\/run<\/h1>/);
  assert.equal(runName("/run"), "run");
});
