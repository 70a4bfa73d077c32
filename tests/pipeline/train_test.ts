/**
 * The train stage (lib/pipeline/train.ts and its command) end to end on a tiny model: batch.arrow in, checkpoint out (PEFT adapter, optimizer
 * state, metrics.arrow); resuming; refusing another LoRA shape; a batch without masked tokens; the CLI.
 */

import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { listFromArrays, readStageFile, writeStageFile } from "../../lib/arrow/mod.ts";
import { loadConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import type { Config } from "../../lib/config/schema.ts";
import { openSession, train, type TrainRequest, writeStageOutput } from "../../lib/pipeline/mod.ts";
import { denoRunArgs } from "../helpers/commands.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { SAMPLE_META, sampleColumns } from "../fixtures/arrow_samples.ts";
import { mulberry32 } from "../reference/weights.ts";
import { Progress } from "../../lib/progress.ts";

const VOCAB = 512;

/** A batch.arrow of `n` episodes whose old log-probs are the base model's (ratios start at 1). */
async function writeBatch(path: string, model: string, n: number, masked = true): Promise<void> {
  const rand = mulberry32(n);
  const tokens = Array.from(
    { length: n },
    (_, i) => Int32Array.from({ length: 8 + 3 * i }, () => Math.floor(rand() * VOCAB)),
  );
  const policy = await LocalPolicy.load(model);
  const lps = await policy.logprobs(tokens.map((t) => [...t]));
  await policy.close();
  const prompt = 4;
  const columns = {
    ...sampleColumns("batch", n),
    tokens: listFromArrays(tokens),
    prompt_len: Int32Array.from(tokens, () => prompt),
    sampled: listFromArrays(tokens.map((t) => Uint8Array.from(t, (_, k) => (k >= prompt ? 1 : 0)))),
    logprobs: listFromArrays(lps.map((lp) => Float32Array.from(lp, (v, k) => (k >= prompt ? v : 0)))),
    turn_idx: listFromArrays(tokens.map((t) => new Int16Array(t.length))),
    loss_mask: listFromArrays(
      tokens.map((t) => Uint8Array.from(t, (_, k) => (masked && k >= prompt ? 1 : 0))),
    ),
    advantages: listFromArrays(tokens.map((t, i) => new Float32Array(t.length).fill(i % 2 ? -1 : 1))),
  };
  await writeStageFile(path, "batch", columns, { ...SAMPLE_META, sampling: { temperature: 1 } });
}

/** `train` on the batch file at `batch` in a session of its own, its checkpoint written to `out`. */
async function runTrain(
  config: Config,
  hash: string,
  batch: string,
  out: string,
  options: TrainRequest = { step: 0 },
) {
  const progress = new Progress({ write: () => {}, isTerminal: false });
  const session = openSession(config, hash, { progress, showProgress: false });
  try {
    const output = await train(session, await readStageFile(batch, "batch"), options);
    await writeStageOutput(out, output);
    return output.summary;
  } finally {
    await session.close();
  }
}

/** The overrides `setup` applied, to build a variant of its configuration. */
function baseOverrides(config: Config): Array<[string, string]> {
  return [
    ["model.path", config.model.path],
    ["train.lora.r", "2"],
    ["train.optimizer.lr", "0.01"],
    ["train.num_iterations", "2"],
  ];
}

async function setup(overrides: Array<[string, string]> = []) {
  const model = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 3 });
  const dir = await Deno.makeTempDir({ prefix: "train-stage-" });
  const batch = join(dir, "batch.arrow");
  await writeBatch(batch, model, 4);
  const { config, hash } = await loadConfig({
    overrides: [
      ["model.path", model],
      ["train.lora.r", "2"],
      ["train.optimizer.lr", "0.01"],
      ["train.num_iterations", "2"],
      ...overrides,
    ],
  });
  return { model, dir, batch, config, hash };
}

Deno.test("train writes a PEFT adapter, optimizer state and metrics.arrow; the adapter changes the policy", async () => {
  const { model, dir, batch, config, hash } = await setup();
  const out = join(dir, "adapter");
  const result = await runTrain(config, hash, batch, out);
  for (
    const f of [
      "adapter_config.json",
      "adapter_model.safetensors",
      "optimizer.safetensors",
      "trainer_state.json",
    ]
  ) {
    await Deno.stat(join(out, f));
  }
  const metrics = await readStageFile(join(out, "metrics.arrow"), "metrics");
  assert.equal(metrics.rows, 2);
  assert.deepEqual(metrics.column("step"), [1, 2]);
  assert.ok((metrics.column("grad_norm") as number[]).every((g) => g > 0));
  assert.equal(metrics.metadata.adapter, result.adapterId);
  const config_ = JSON.parse(await Deno.readTextFile(join(out, "adapter_config.json")));
  assert.equal(config_.r, 2);
  // Not an absolute path of this machine: peft resolves it elsewhere (docs/outputs.md).
  assert.equal(config_.base_model_name_or_path, relative(Deno.cwd(), model));
  assert.deepEqual(config_.target_modules, [
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
  ]);
  const [base, trained] = [await LocalPolicy.load(model), await LocalPolicy.load(model, { adapter: out })];
  try {
    const seq = [[5, 6, 7, 8, 9, 10]];
    const [a, b] = [await base.logprobs(seq), await trained.logprobs(seq)];
    assert.ok(
      a[0].some((v, t) => t > 0 && Math.abs(v - b[0][t]) > 1e-4),
      "the trained adapter changes log-probs",
    );
  } finally {
    await base.close();
    await trained.close();
  }
});

Deno.test("train resumes from its checkpoint (step and moments); refuses another base model or LoRA shape", async () => {
  const { dir, batch, config, hash } = await setup();
  const first = join(dir, "a1"), second = join(dir, "a2");
  await runTrain(config, hash, batch, first);
  const resumed = await loadConfig({ overrides: [...baseOverrides(config), ["model.adapter", first]] });
  const again = await runTrain(resumed.config, resumed.hash, batch, second);
  assert.deepEqual(again.metrics.map((m) => m.step), [3, 4]);
  // Same shapes, another config (rope_theta): only the saved base-model identity can tell.
  const otherBase = await makeTinyModel({ vocab: VOCAB, tokenizer: false, seed: 3, ropeTheta: 10000 });
  const elsewhere = await loadConfig({
    overrides: [["model.path", otherBase], ["train.lora.r", "2"], ["model.adapter", first]],
  });
  await assert.rejects(
    () => runTrain(elsewhere.config, elsewhere.hash, batch, join(dir, "a3")),
    (e: Error) => e instanceof UserError && /trained on another base model/.test(e.message),
  );
  const other = await loadConfig({
    overrides: [["model.path", config.model.path], ["train.lora.r", "4"], ["model.adapter", first]],
  });
  await assert.rejects(
    () => runTrain(other.config, other.hash, batch, join(dir, "a4")),
    (e: Error) => e instanceof UserError && /r 2 ≠ 4/.test(e.message),
  );
});

Deno.test("train.loss.reference initial holds the KL term to the adapter the run started from, base to the adapter off", async () => {
  const { dir, batch, config, hash } = await setup();
  const start = join(dir, "start");
  await runTrain(config, hash, batch, start); // an adapter that moves the policy away from the base model
  const kl = async (reference: string, out: string) => {
    const c = await loadConfig({
      overrides: [
        ...baseOverrides(config),
        ["model.adapter", start],
        ["train.loss.beta", "0.5"],
        ["train.loss.reference", reference],
      ],
    });
    return (await runTrain(c.config, c.hash, batch, join(dir, out))).metrics.map((m) => m.kl);
  };
  const [initial, base] = [await kl("initial", "initial"), await kl("base", "base")];
  // The first optimizer step's policy is the starting adapter: against itself the KL is 0 (up to the
  // micro-batch packing's rounding); the step then moves the policy away from it.
  assert.ok(Math.abs(initial[0]) < 1e-7, `KL to the starting adapter before it moved: ${initial[0]}`);
  assert.ok(initial[1] > 1e-9, `KL to the starting adapter after a step: ${initial[1]}`);
  assert.ok(base[0] > 1e-5, `KL to the base model with the starting adapter on: ${base[0]}`);
});

Deno.test("a batch without masked tokens trains to zero loss and zero gradient; every metric is finite but entropy (NaN: no token to average)", async () => {
  const { dir, model, config, hash } = await setup([["train.optimizer.name", "sgd"]]);
  const batch = join(dir, "empty-mask.arrow");
  await writeBatch(batch, model, 3, false);
  const result = await runTrain(config, hash, batch, join(dir, "a"));
  for (const m of result.metrics) {
    assert.equal(m.loss, 0);
    assert.equal(m.grad_norm, 0);
    assert.equal(m.tokens, 0);
    assert.equal(m.clip_frac, 0);
    // Every metric, not only the four above; entropy is a mean over no token, so it says n/a.
    const notFinite = Object.entries(m).filter(([, v]) => typeof v === "number" && !Number.isFinite(v));
    assert.deepEqual(notFinite.map(([k]) => k), ["entropy"], `step ${m.step}`);
    assert.ok(Number.isNaN(m.entropy));
  }
});

Deno.test("train reports each optimizer step as it finishes, not at the end", async () => {
  const { dir, batch, config, hash } = await setup();
  const seen: Array<{ step: number; at: number }> = [];
  const result = await runTrain(config, hash, batch, join(dir, "progress-adapter"), {
    step: 0,
    onStep: (m) => seen.push({ step: m.step, at: performance.now() }),
  });
  assert.deepEqual(seen.map((s) => s.step), [1, 2]);
  const gap = seen[1].at - seen[0].at;
  assert.ok(gap >= 0.5 * result.metrics[1].seconds * 1000, `step reports ${gap.toFixed(0)} ms apart`);
});

Deno.test("deno task train runs from the command line and prints a line per step", async () => {
  const { dir, batch, model } = await setup();
  const out = join(dir, "cli-adapter");
  const command = new Deno.Command(Deno.execPath(), {
    args: [
      ...denoRunArgs("stages/train.ts"),
      "--in",
      batch,
      "--out",
      out,
      `--model.path=${model}`,
      "--train.lora.r=2",
    ],
    stdout: "piped",
    stderr: "piped",
  });
  const r = await command.output();
  const [stdout, stderr] = [new TextDecoder().decode(r.stdout), new TextDecoder().decode(r.stderr)];
  assert.equal(r.code, 0, stderr);
  assert.match(stderr, /^train: steps 1\/\d+ loss /m);
  assert.match(stdout, /wrote .*cli-adapter \(lora:[0-9a-f]{16}\)/);
});
