/**
 * `deno task train`: trains the LoRA adapter on batch.arrow and writes a checkpoint directory: a PEFT
 * adapter (adapter_config.json, adapter_model.safetensors), the optimizer state and step for resuming,
 * and metrics.arrow (one row per optimizer step).
 *
 *   deno task train --in runs/x/batch.arrow --out runs/x/adapter [--adapter runs/x/prev] [--train.k=v …]
 *
 * Without `--adapter`, LoRA starts as PEFT starts it (A Kaiming-uniform, B = 0, seeded by train.seed).
 * With it, the adapter and (when saved by this stage with the same optimizer) the optimizer state
 * continue; its rank, alpha, rsLoRA and targets must equal train.lora.
 *
 * The stage is a pure function (`train`, exported from mod.ts) plus a thin `main`.
 */

import { join, resolve } from "node:path";
import { readStageFile } from "../lib/arrow/read.ts";
import { writeStageFile } from "../lib/arrow/write.ts";
import type { Config } from "../lib/config/schema.ts";
import { UserError } from "../lib/errors.ts";
import { adapterHash } from "../lib/engine/local_policy.ts";
import { type Adapter, initLoraWeights, type LoraSpec } from "../lib/model/lora.ts";
import { openModelDir } from "../lib/model/model_dir.ts";
import type { Qwen3Config } from "../lib/model/hf_config.ts";
import { runStageMain, type StageArgs } from "../lib/stage/cli.ts";
import { sha256Hex } from "../lib/model/tokenizer.ts";
import { type Checkpoint, loadCheckpoint, loraDifferences, saveCheckpoint } from "../lib/train/checkpoint.ts";
import { episodesOf, samplingTemperature } from "../lib/train/episodes.ts";
import { initOptimizerState } from "../lib/train/optimizer.ts";
import { type StepMetrics, trainOnBatch } from "../lib/train/step.ts";
import { Trainer } from "../lib/train/trainer.ts";

/** What `train` produced. */
export interface TrainResult {
  /** The checkpoint directory written. */
  out: string;
  metrics: StepMetrics[];
  /** Identity of the trained adapter (as rollouts record it). */
  adapterId: string;
}

/** Trains on `args.input` (batch.arrow) and writes the checkpoint `args.output`. */
export async function train(args: StageArgs): Promise<TrainResult> {
  const { config } = args;
  const c = config.train;
  const batch = await readStageFile(args.input!, "batch");
  const episodes = episodesOf(batch);
  const model = await openModelDir(config.model.path);
  const spec: LoraSpec = {
    r: c.lora.r,
    alpha: c.lora.alpha,
    rslora: c.lora.rslora,
    targets: [...c.lora.targets],
  };
  const baseConfigSha256 = await sha256Hex(await Deno.readFile(join(model.dir, "config.json")));
  const start = await startingPoint(args.flags.adapter as string | undefined, model.config, spec, config);
  checkSameBase(start, baseConfigSha256, model.dir);
  const trainer = await Trainer.create(model, {
    lora: spec,
    objective: c.loss.aggregation === "sft" ? "sft" : "grpo",
    withReference: c.loss.beta > 0,
    ep: config.model.ep,
  }, { threads: config.model.threads });
  let metrics: StepMetrics[];
  try {
    metrics = await trainOnBatch(trainer, episodes, start.adapter.weights, start.optimizer, {
      aggregation: c.loss.aggregation,
      maxResponseTokens: c.loss.max_response_tokens ?? config.rollout.generation.max_total_tokens,
      microBatchTokens: c.micro_batch_tokens,
      numIterations: c.num_iterations,
      optimizer: c.optimizer,
      lr: c.optimizer.lr,
      maxGradNorm: c.optimizer.max_grad_norm,
      schedule: c.schedule,
      totalSteps: config.loop.steps * c.num_iterations,
      scalars: {
        temperature: samplingTemperature(batch, config.rollout.generation.temperature),
        epsLow: c.loss.eps_low,
        epsHigh: c.loss.eps_high,
        beta: c.loss.beta,
      },
      seed: c.seed,
    });
  } finally {
    await trainer.close();
  }
  const adapterId = `lora:${(await adapterHash(start.adapter, model.config)).slice(0, 16)}`;
  const out = resolve(args.output!);
  await saveCheckpoint(
    out,
    start,
    model.config,
    { baseModel: model.dir, baseConfigSha256, configHash: args.configHash },
    (tmp) =>
      writeMetrics(join(tmp, "metrics.arrow"), metrics, {
        config_hash: args.configHash,
        input_hashes: { batch: batch.sha256 },
        model: model.dir,
        adapter: adapterId,
        seed: c.seed,
      }),
  );
  return { out, metrics, adapterId };
}

/** A fresh adapter (PEFT init) or the checkpoint at `dir`, checked against train.lora. */
async function startingPoint(
  dir: string | undefined,
  cfg: Qwen3Config,
  spec: LoraSpec,
  config: Config,
): Promise<Checkpoint> {
  const name = config.train.optimizer.name;
  if (!dir) {
    const adapter: Adapter = { spec, weights: initLoraWeights(cfg, spec, config.train.seed) };
    return { adapter, optimizer: initOptimizerState(name, adapter.weights) };
  }
  const checkpoint = await loadCheckpoint(dir, cfg, name);
  const differences = loraDifferences(checkpoint.adapter.spec, spec);
  if (differences.length > 0) {
    throw new UserError(`train: adapter ${dir}`, {
      value: differences.join(", "),
      why: "its LoRA shape differs from train.lora",
      fix: "set train.lora to the adapter's values, or start without --adapter",
    });
  }
  return checkpoint;
}

/** Refuses to continue a checkpoint saved on another base model (its config.json differs). */
function checkSameBase(start: Checkpoint, sha256: string, dir: string): void {
  const saved = start.state?.base_config_sha256;
  if (saved && saved !== sha256) {
    throw new UserError(`train: the --adapter checkpoint's base model`, {
      value: start.state!.base_model,
      why: `it was trained on another base model (config.json sha256 ${saved.slice(0, 12)}…, ${dir} has ${
        sha256.slice(0, 12)
      }…)`,
      fix: "point model.path at the base model the adapter was trained on, or start without --adapter",
    });
  }
}

async function writeMetrics(
  path: string,
  rows: StepMetrics[],
  metadata: Parameters<typeof writeStageFile>[3],
): Promise<void> {
  const column = <K extends keyof StepMetrics>(k: K) => rows.map((r) => r[k]);
  await writeStageFile(path, "metrics", {
    step: Int32Array.from(column("step")),
    loss: Float64Array.from(column("loss")),
    pg_loss: Float64Array.from(column("pg_loss")),
    kl: Float64Array.from(column("kl")),
    clip_frac: Float64Array.from(column("clip_frac")),
    grad_norm: Float64Array.from(column("grad_norm")),
    lr: Float64Array.from(column("lr")),
    tokens: Int32Array.from(column("tokens")),
    seconds: Float64Array.from(column("seconds")),
    entropy: Float64Array.from(column("entropy")),
  }, metadata);
}

if (import.meta.main) {
  await runStageMain({
    name: "train",
    summary:
      "Trains the LoRA adapter on batch.arrow; writes a checkpoint directory (PEFT adapter, optimizer state, metrics.arrow).",
    needsInput: true,
    needsOutput: true,
    stringFlags: ["adapter"],
    flagHelp: ["--adapter DIR    checkpoint or PEFT adapter to continue from (default: a fresh adapter)"],
    run: async (args) => {
      const result = await train(args);
      for (const m of result.metrics) {
        console.log(
          `step ${m.step}: loss ${m.loss.toFixed(5)} kl ${m.kl.toFixed(5)} clip ${m.clip_frac.toFixed(3)} ` +
            `grad_norm ${m.grad_norm.toFixed(4)} lr ${m.lr.toExponential(2)} tokens ${m.tokens} ${
              m.seconds.toFixed(1)
            }s`,
        );
      }
      console.log(`wrote ${result.out} (${result.adapterId})`);
    },
  });
}
