/**
 * The demo's supervised warm start: traces written by the teacher (teacher.ts) through the real rollout,
 * scored and masked by the real stages (so `loss_mask` is exactly the policy's `sampled` tokens: the
 * assistant turns, never the prompt or the `<tool_response>` turn), then the train stage with the `sft`
 * loss. A share `directFraction` of the traces answers at once with a plausible wrong number, so the
 * starting policy often skips the calculator: the behaviour GRPO then has to unlearn.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { Progress } from "../stage/progress.ts";
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
  const [choice, numbers] = [mulberry32(s.seed), mulberry32(s.seed + 1)];
  const plans = new Map<string, TracePlan>();
  for (const task of tasks) {
    const direct = choice() < s.directFraction;
    plans.set(
      task.id,
      direct ? { kind: "direct", answer: wrongAnswer(task.answer!, numbers) } : { kind: "tool" },
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

/**
 * Writes the warm start's traces as batch files of `tracesPerStep` traces each (through rollout, score
 * and mask: `dir/traces-NNN/{rollouts,batch}.arrow`); returns the batch files' paths.
 */
export async function writeWarmStartBatches(i: WarmStartInputs): Promise<string[]> {
  const tasks = i.tasks.slice(0, i.settings.traces);
  const plans = tracePlans(tasks, i.settings);
  const teacher = new TeacherPolicy(i.tokenizer, tasks, (task) => plans.get(task.id)!);
  const paths: string[] = [];
  for (let start = 0, k = 0; start < tasks.length; start += i.settings.tracesPerStep, k++) {
    const dir = join(i.dir, `traces-${String(k).padStart(3, "0")}`);
    const chunk = tasks.slice(start, start + i.settings.tracesPerStep);
    paths.push(await writeTraceBatch(i, teacher, chunk, dir));
  }
  return paths;
}

/** One batch file of teacher traces for `tasks`, in `dir`. */
async function writeTraceBatch(i: WarmStartInputs, teacher: TeacherPolicy, tasks: Task[], dir: string) {
  const { config } = i;
  const out = await rollout(teacher, i.tokenizer, tasks, {
    rollout: { ...config.rollout, group_size: 1 },
    systemPrompt: config.data.system_prompt,
    step: 0,
    tools: i.tools,
    showProgress: false,
  });
  await Deno.mkdir(dir, { recursive: true });
  const rolloutsPath = join(dir, "rollouts.arrow");
  await writeStageFile(rolloutsPath, "rollouts", out.columns, {
    config_hash: i.configHash,
    model: config.model.path,
    adapter: "teacher",
    tokenizer_hash: i.tokenizer.info.tokenizerSha256,
    chat_template_hash: i.tokenizer.info.chatTemplateSha256,
    sampling: { ...out.sampling, source: "demo teacher" },
    seed: i.settings.seed,
  });
  const { tools: t } = config.rollout;
  const scored = await score(await readStageFile(rolloutsPath, "rollouts"), {
    config: config.score,
    sandbox: { kind: t.sandbox, unsafeNoSandbox: t.unsafe_no_sandbox },
    configHash: i.configHash,
  });
  const batch = mask(scored.table, { config: config.mask, configHash: i.configHash });
  const batchPath = join(dir, "batch.arrow");
  await writeTable(batchPath, "batch", batch.table);
  return batchPath;
}

/** Called after each warm-start step with its number (1-based), the step count and the loss. */
export type WarmStartProgress = (step: number, steps: number, loss: number) => void;

/**
 * The warm start: traces, then `settings.steps` sft steps, each on the next batch file of traces (one
 * train stage call per step, continuing the adapter and its optimizer state); returns the last checkpoint,
 * moved to `dir/adapter`.
 */
export async function warmStart(i: WarmStartInputs, onStep?: WarmStartProgress): Promise<TrainResult> {
  const batches = await Promise.all(
    (await writeWarmStartBatches(i)).map((path) => readStageFile(path, "batch")),
  );
  const s = i.settings;
  const quiet = new Progress({ write: () => {}, isTerminal: false });
  let result: TrainResult | undefined;
  for (let step = 0; step < s.steps; step++) {
    const config = sftConfig(i.config, s, result?.out ?? null);
    // Two directories in turn: the stage never writes over the adapter it continues from.
    const out = join(i.dir, `adapter-${step % 2}`);
    const options = { ...trainOptionsOf(config, i.configHash, out, { overwrite: true }), progress: quiet };
    result = await train(batches[step % batches.length], options);
    onStep?.(step + 1, s.steps, result.metrics.at(-1)!.loss);
  }
  if (!result) throw new Error("warmStart: settings.steps must be at least 1");
  const final = join(i.dir, "adapter");
  await Deno.remove(final, { recursive: true }).catch(() => {});
  await Deno.rename(result.out, final);
  return { ...result, out: resolve(final) };
}

/** The run's configuration turned into one sft step continuing from `adapter`. */
function sftConfig(c: Config, s: WarmStartSettings, adapter: string | null): Config {
  return {
    ...c,
    model: { ...c.model, adapter },
    train: {
      ...c.train,
      num_iterations: 1,
      loss: { ...c.train.loss, aggregation: "sft", beta: 0 },
      optimizer: { ...c.train.optimizer, lr: s.lr },
      schedule: { ...c.train.schedule, name: "constant", warmup_steps: 0 },
    },
    loop: { ...c.loop, steps: s.steps },
  };
}
