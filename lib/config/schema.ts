/**
 * The one declaration of every configuration key: type, default, range or choices, one-line doc.
 * Validation, the `Config` type and the `--help` listing all come from `SCHEMA`; the repository's
 * `config.yaml` must hold exactly these keys with these defaults (tests/config/load_test.ts checks both).
 *
 * Relative paths (model.path, data.path, loop.run_dir, ...) are kept as written; stages resolve them
 * against the current directory (`deno task` runs from the repository root).
 */
import type { Infer } from "./fields.ts";
import type { AGGREGATIONS, LORA_TARGETS } from "./sections/train.ts";
import type { ESTIMATORS, REWARD_NAMES } from "./sections/score.ts";
import type { TOOL_NAMES } from "./sections/rollout.ts";
import { data, model } from "./sections/model.ts";
import { rollout } from "./sections/rollout.ts";
import { mask, score } from "./sections/score.ts";
import { train } from "./sections/train.ts";
import { bench, evaluation, loop } from "./sections/run.ts";
import { modelBackend, serve } from "./sections/server.ts";
import { demo } from "./sections/demo.ts";

export * from "./sections/model.ts";
export * from "./sections/rollout.ts";
export * from "./sections/mcp.ts";
export * from "./sections/score.ts";
export * from "./sections/judge.ts";
export * from "./sections/train.ts";
export * from "./sections/run.ts";
export * from "./sections/server.ts";
export * from "./sections/demo.ts";

/** Every configuration key. The order here is the order of `config.yaml` and of `--help`. */
export const SCHEMA = {
  model: { ...model, ...modelBackend },
  data,
  rollout,
  score,
  mask,
  train,
  loop,
  eval: evaluation,
  bench,
  serve,
  demo,
};

/** The resolved configuration: every key present, every value checked. */
export type Config = Infer<typeof SCHEMA>;
export type ModelConfig = Config["model"];
export type DataConfig = Config["data"];
export type RolloutConfig = Config["rollout"];
export type ScoreConfig = Config["score"];
export type JudgeConfig = Config["score"]["judge"];
export type MaskConfig = Config["mask"];
export type TrainConfig = Config["train"];
export type LoopConfig = Config["loop"];
export type EvalConfig = Config["eval"];
export type BenchConfig = Config["bench"];
export type ServeConfig = Config["serve"];
export type DemoConfig = Config["demo"];
export type ModelServerConfig = Config["model"]["server"];
export type RewardName = (typeof REWARD_NAMES)[number];
export type ToolName = (typeof TOOL_NAMES)[number];
export type Estimator = (typeof ESTIMATORS)[number];
export type Aggregation = (typeof AGGREGATIONS)[number];
export type LoraTarget = (typeof LORA_TARGETS)[number];
