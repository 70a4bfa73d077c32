/**
 * The judge reward through `deno task score`: against `deno task serve` on a tiny random model, requests go
 * out and come back (grades parse or are `judge_unparseable`) and a second run reads the cache without a
 * request; a dead endpoint stops the stage with one line, exit 2, writing nothing.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { readStageFile } from "../../lib/arrow/read.ts";
import { writeTable } from "../../lib/arrow/stage_io.ts";
import { type EpisodeSpec, rolloutsTable } from "../fixtures/rollouts.ts";
import { assertRefused, denoRunArgs, ROOT, stage } from "../helpers/commands.ts";
import { countingProxy, deadUrl } from "../helpers/fake_judge.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";

const SPECS: EpisodeSpec[] = [
  { group: 0, task: { answer: "4" }, turns: [{ text: "The answer is 4." }] },
  { group: 0, task: { answer: "4" }, turns: [{ text: "It is 5." }] },
  { group: 1, task: { answer: "7" }, turns: [{ text: "<think>3+4</think>7" }] },
];

/** A directory with rollouts.arrow and a config whose judge is at `url` (model `judge`). */
async function workspace(url: string): Promise<{ dir: string; config: string; rollouts: string }> {
  const dir = await Deno.makeTempDir({ prefix: "judge-cli-" });
  const rollouts = join(dir, "rollouts.arrow");
  await writeTable(rollouts, "rollouts", rolloutsTable(SPECS));
  const config = join(dir, "config.yaml");
  await Deno.writeTextFile(
    config,
    [
      "score:",
      "  rewards:",
      "    judge: 1.0",
      "  judge:",
      `    url: ${url}`,
      "    model: judge",
      "    max_tokens: 12",
      "    retries: 1",
      "    backoff_s: 0",
      "",
    ].join("\n"),
  );
  return { dir, config, rollouts };
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

Deno.test("deno task score with a dead judge: one line naming it, exit 2, no scored file, nothing cached", async () => {
  const url = deadUrl();
  const { dir, config, rollouts } = await workspace(url);
  const out = join(dir, "scored.arrow");
  const r = await stage("score", ["--config", config, "--in", rollouts, "--out", out]);
  assertRefused(
    r,
    new RegExp(`^error: judge ${url}: no answer: .*Fix: start the judge server`),
    "dead judge",
  );
  assert.equal(await exists(out), false, "no scored file");
  assert.equal(await exists(`${out}.manifest.json`), false, "no manifest");
  assert.equal(await exists(join(dir, "judge-cache")), false, "no cache directory");
});

/** The JSON entries below a judge cache directory. */
async function cacheEntries(dir: string): Promise<{ model: string; answer: unknown }[]> {
  const entries = [];
  for await (const sub of Deno.readDir(dir)) {
    if (!sub.isDirectory) continue;
    for await (const f of Deno.readDir(join(dir, sub.name))) {
      entries.push(JSON.parse(await Deno.readTextFile(join(dir, sub.name, f.name))));
    }
  }
  return entries;
}

const EXAMPLE = join(ROOT, "examples/judge_serve.yaml");

/** Starts `deno task serve` with the example's config on the tiny model; returns its URL and a stop function. */
async function startServe(dir: string): Promise<{ url: string; stop: () => Promise<void> }> {
  const model = await makeTinyModel();
  const child = new Deno.Command(Deno.execPath(), {
    args: [...denoRunArgs("stages/serve.ts"), "--config", EXAMPLE, "--port", "0"]
      .concat([`--model.path=${model}`]),
    cwd: dir,
    stdout: "piped",
    stderr: "null",
    env: { NO_COLOR: "1" },
  }).spawn();
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch { /* already exited */ }
    await child.status;
  };
  let text = "";
  for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
    text += chunk;
    const m = /at (http:\/\/\S+)/.exec(text);
    if (m) return { url: m[1], stop };
  }
  await stop();
  throw new Error(`deno task serve exited before listening: ${text}`);
}

Deno.test("examples/judge_serve.yaml: deno task score against deno task serve; a rerun sends no request", async () => {
  const scratch = await Deno.makeTempDir({ prefix: "judge-serve-" });
  const serve = await startServe(scratch);
  const proxy = countingProxy(serve.url);
  try {
    const { dir, rollouts } = await workspace(proxy.url);
    // The example as shipped, but for the judge's address and a short answer (the tiny model is slow).
    const scoreTo = (out: string) =>
      stage("score", [
        ...["--config", EXAMPLE, `--score.judge.url=${proxy.url}`, "--score.judge.max_tokens=12"],
        ...["--in", rollouts, "--out", join(dir, out)],
      ]);
    const first = await scoreTo("a.arrow");
    assert.equal(first.code, 0, first.stderr);
    assert.match(
      first.stderr,
      /judge: 3 pointwise requests, 0 answered from \S+judge-cache, 3 sent to \S+; /,
    );
    const posts = proxy.requests.filter((q) => q.path === "/v1/chat/completions");
    assert.equal(posts.length, 3, "one request per episode reached the server");
    assert.equal(JSON.parse(posts[0].body).model, "judge");
    for (const { answer } of posts) {
      assert.equal(answer?.status, 200, answer?.text);
      const completion = JSON.parse(answer!.text);
      assert.equal(completion.choices[0].message.role, "assistant");
      assert.ok(completion.usage.completion_tokens >= 1, "the model sampled an answer");
    }
    const a = await readStageFile(join(dir, "a.arrow"), "scored");
    const statuses = a.column("status_judge") as string[];
    assert.ok(statuses.every((s) => s === "judged" || s === "judge_unparseable"), statuses.join());
    const cached = await cacheEntries(join(dir, "judge-cache"));
    assert.equal(cached.length, 3, "every answer cached");
    assert.ok(
      cached.every((e) => e.model === "judge" && typeof e.answer === "string"),
      JSON.stringify(cached),
    );
    const second = await scoreTo("b.arrow");
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stderr, /judge: 3 pointwise requests, 3 answered from \S+, 0 sent/);
    assert.equal(proxy.requests.length, 3, "the rerun read the cache without a request");
    const b = await readStageFile(join(dir, "b.arrow"), "scored");
    assert.deepEqual(b.column("status_judge"), statuses);
    assert.deepEqual(b.column("reward_judge"), a.column("reward_judge"));
  } finally {
    await proxy.close();
    await serve.stop();
  }
});
