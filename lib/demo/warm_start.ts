/**
 * The demo's supervised warm start: traces written by the teacher (teacher.ts) through the real rollout,
 * scored and masked by the real stages (so `loss_mask` is exactly the policy's `sampled` tokens: the
 * assistant turns, never the prompt or the `<tool_response>` turn), then the train stage with the `sft`
 * loss. A share `directFraction` of the traces answers at once with a plausible wrong number, so the
 * starting policy often skips the calculator: the behaviour GRPO then has to unlearn.
 *
 * @module
 */

import { join } from "node:path";
import { readStageFile } from "../arrow/read.ts";
import type { Config } from "../config/schema.ts";
import { mulberry32, randomInt } from "../data/random.ts";
import type { Task } from "../data/task.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import { writeTable } from "../score/stage_io.ts";
import type { Tool } from "../tools/types.ts";
import { writeStageFile } from "../arrow/write.ts";
import { rollout } from "../../stages/rollout.ts";
import { score } from "../../stages/score.ts";
import { mask } from "../../stages/mask.ts";
import { train, trainOptionsOf, type TrainResult } from "../../stages/train.ts";
import { TeacherPolicy, type TracePlan } from "./teacher.ts";
import type { WarmStartSettings } from "./settings.ts";

/** A plausible wrong answer: the right one moved by a random nonzero offset of up to ~20% (at least ±9). */
export function wrongAnswer(answer: string, rng: () => number): string {
  const value = Number(answer);
  const reach = Math.max(9, Math.round(Math.abs(value) / 5));
  const offset = randomInt(rng, 1, reach) * (rng() < 0.5 ? -1 : 1);
  return String(value + offset);
}

/** Each task's trace: `direct` for a seeded share `directFraction` of them, else a calculator call. */
export function tracePlans(tasks: readonly Task[], s: WarmStartSettings): Map<string, TracePlan> {
  const rng = mulberry32(s.seed);
  const plans = new Map<string, TracePlan>();
  for (const task of tasks) {
    const direct = rng() < s.directFraction;
    plans.set(
      task.id,
      direct ? { kind: "direct", answer: wrongAnswer(task.answer!, rng) } : { kind: "tool" },
    );
  }
  return plans;
}

/** What the warm start needs from the run. */
export interface WarmStartInputs {
  config: Config;
  configHash: string;
  tokenizer: ChatTokenizer;
  tools: ReadonlyMap<string, Tool>;
  /** Training tasks: the first `settings.traces` become traces. */
  tasks: readonly Task[];
  settings: WarmStartSettings;
  /** Directory for rollouts / scored / batch .arrow and the adapter (`adapter/`). */
  dir: string;
}

/** Writes the warm start's traces as `dir/batch.arrow` (through rollout, score and mask); returns its path. */
export async function writeWarmStartBatch(i: WarmStartInputs): Promise<string> {
  const tasks = i.tasks.slice(0, i.settings.traces);
  const plans = tracePlans(tasks, i.settings);
  const teacher = new TeacherPolicy(i.tokenizer, tasks, (task) => plans.get(task.id)!);
  const { config } = i;
  const out = await rollout(teacher, i.tokenizer, tasks, {
    rollout: { ...config.rollout, group_size: 1 },
    systemPrompt: config.data.system_prompt,
    step: 0,
    tools: i.tools,
    showProgress: false,
  });
  await Deno.mkdir(i.dir, { recursive: true });
  const rolloutsPath = join(i.dir, "rollouts.arrow");
  await writeStageFile(rolloutsPath, "rollouts", out.columns, {
    config_hash: i.configHash,
    model: config.model.path,
    adapter: "teacher",
    tokenizer_hash: i.tokenizer.info.tokenizerSha256,
    chat_template_hash: i.tokenizer.info.chatTemplateSha256,
    sampling: { ...out.sampling, source: "demo teacher" },
    seed: i.settings.seed,
  });
  const sandbox = {
    kind: config.rollout.tools.sandbox,
    unsafeNoSandbox: config.rollout.tools.unsafe_no_sandbox,
  };
  const scored = await score(await readStageFile(rolloutsPath, "rollouts"), {
    config: config.score,
    sandbox,
    configHash: i.configHash,
  });
  const batch = mask(scored.table, { config: config.mask, configHash: i.configHash });
  const batchPath = join(i.dir, "batch.arrow");
  await writeTable(batchPath, "batch", batch.table);
  return batchPath;
}

/** The warm start: traces, then `settings.epochs` sft passes; returns the adapter checkpoint. */
export async function warmStart(i: WarmStartInputs): Promise<TrainResult> {
  const batchPath = await writeWarmStartBatch(i);
  const config: Config = {
    ...i.config,
    model: { ...i.config.model, adapter: null },
    train: {
      ...i.config.train,
      num_iterations: i.settings.epochs,
      loss: { ...i.config.train.loss, aggregation: "sft", beta: 0 },
      optimizer: { ...i.config.train.optimizer, lr: i.settings.lr },
      schedule: { ...i.config.train.schedule, name: "constant", warmup_steps: 0 },
    },
    loop: { ...i.config.loop, steps: 1 },
  };
  const options = trainOptionsOf(config, i.configHash, join(i.dir, "adapter"), { overwrite: true });
  return await train(await readStageFile(batchPath, "batch"), options);
}
