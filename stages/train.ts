/**
 * `deno task train`: trains the LoRA adapter on batch.arrow and writes a checkpoint directory: a PEFT
 * adapter (adapter_config.json, adapter_model.safetensors), the optimizer state and step for resuming,
 * and metrics.arrow (one row per optimizer step).
 *
 *   deno task train --in runs/x/batch.arrow --out runs/x/adapter [--adapter runs/x/prev] [--train.k=v …]
 *
 * Without an adapter (`model.adapter`, or its flag `--adapter`), LoRA starts as PEFT starts it
 * (A Kaiming-uniform, B = 0, seeded by train.seed). With one, the adapter and (when saved by this stage
 * with the same optimizer) the optimizer state continue; its rank, alpha, rsLoRA and targets must equal
 * train.lora, and a checkpoint saved on another base model is refused — both before the model loads,
 * as are a batch that cannot be read whole and a disk without room for the checkpoint.
 *
 * The command line only: read, a session, the pipeline's `train` (lib/pipeline/train.ts), write.
 * `--in` may repeat or be a quoted glob: the batch files (e.g. rollout shards of one step) are read as
 * one, in the order given, after checking they come from one policy version and configuration
 * (lib/arrow/merge.ts, docs/serving.md "Shards").
 *
 * @module
 */

import { resolve } from "node:path";
import { readStageFiles } from "../lib/arrow/merge.ts";
import { checkFreeSpace } from "../lib/fs/disk_space.ts";
import { defaultModelMissing } from "../lib/model/default_model.ts";
import { readQwen3Config } from "../lib/model/hf_config.ts";
import { openSession, stepLine, train, writeStageOutput } from "../lib/pipeline/mod.ts";
import { checkpointBytes } from "../lib/train/checkpoint.ts";
import { algorithmOf, tokenInputsOf } from "../lib/train/algorithm.ts";
import { requireInputColumns } from "../lib/train/episodes.ts";
import { valueCheckpointBytes } from "../lib/train/value_checkpoint.ts";
import type { Config } from "../lib/config/schema.ts";
import { checkTrainStart, loraSpecOf } from "../lib/train/train_session.ts";
import { runStageMain, type StageArgs } from "../lib/cli/cli.ts";

/** The adapter to continue fits train.lora and the base model; the checkpoint has room. */
async function check(args: StageArgs): Promise<void> {
  const { model, train: c } = args.config;
  await checkTrainStart(model, c, model.adapter);
  if (await defaultModelMissing(model.path)) return; // made after the checks; its size is not known yet
  const modelConfig = await readQwen3Config(resolve(model.path));
  const value = algorithmOf(args.config).valueLoss ? valueCheckpointBytes(modelConfig.hidden_size) : 0;
  checkFreeSpace(
    args.output!,
    checkpointBytes(modelConfig, loraSpecOf(c), c.optimizer.name, c.num_iterations * c.ppo_epochs) + value,
  );
}

async function main(args: StageArgs): Promise<void> {
  const batch = await readStageFiles(args.inputs, "batch");
  requireInputColumns(batch, tokenInputsOf(algorithmOf(args.config))); // before any progress line
  const session = openSession(args.config, args.configHash);
  try {
    const steps = session.progress.start("train: steps", optimizerSteps(args.config, batch.rows));
    const out = await train(session, batch, { step: 0, onStep: (row) => steps.tick(1, stepLine(row)) });
    const m = out.summary.metrics;
    steps.done(`${m.length} optimizer steps, loss ${m[0]?.loss.toFixed(5)} → ${m.at(-1)?.loss.toFixed(5)}`);
    await writeStageOutput(args.output!, out);
    console.log(`wrote ${resolve(args.output!)} (${out.summary.adapterId})`);
  } finally {
    await session.close();
  }
}

/** Optimizer steps on a batch of `rows` episodes: PPO's minibatches over its epochs, else num_iterations. */
function optimizerSteps(config: Config, rows: number): number {
  const t = config.train;
  if (!algorithmOf(config).valueLoss) return t.num_iterations;
  return t.ppo_epochs * Math.ceil(rows / t.minibatch_episodes);
}

if (import.meta.main) {
  await runStageMain({
    name: "train",
    summary:
      "Trains the LoRA adapter on batch.arrow; writes a checkpoint directory (PEFT adapter, optimizer state, metrics.arrow).",
    needsInput: true,
    manyInputs: true,
    needsOutput: true,
    input: "batch",
    output: { kind: "adapter-dir" },
    usesModel: true,
    configFlags: { adapter: "model.adapter" },
    flagHelp: [
      "--adapter DIR    checkpoint or PEFT adapter to continue from: the same as --model.adapter=DIR",
    ],
    examples: [
      "deno task train --in runs/x/batch.arrow --out runs/x/adapter",
      "deno task train --in runs/x/batch.arrow --out runs/x/adapter2 --adapter runs/x/adapter --train.loss.beta=0.04",
      "deno task train --in runs/x/batch.arrow --out runs/x/adapter --overwrite --train.lora.targets=[q,v]",
    ],
    check,
    run: main,
  });
}
