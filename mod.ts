/**
 * deno-rl: GRPO for Qwen3 tool use, in TypeScript on Deno.
 *
 * The public API for notebooks and scripts. Each stage script (`stages/*.ts`) is a pure function
 * exported here plus a thin command-line `main`; the library pieces the stages stand on are exported
 * beside them.
 *
 * ```ts
 * import { loadConfig, loadTasks, readStageFile } from "./mod.ts";
 * const { config } = await loadConfig();
 * const tasks = await loadTasks(config.data);
 * const scored = await readStageFile("runs/x/scored.arrow", "scored");
 * ```
 *
 * @module
 */

// Stages.
export { rollout, rolloutMetadata, type RolloutOutput, type RolloutStageOptions } from "./stages/rollout.ts";
export type { Episode as RolloutEpisode } from "./lib/rollout/rollout.ts";
export type {
  AssistantTurn,
  Environment,
  EnvironmentContext,
  EnvMessage,
  EnvStep,
} from "./lib/rollout/environment.ts";
export { ScriptedEnvironment } from "./lib/rollout/scripted_env.ts";
export { ToolEnvironment } from "./lib/rollout/tool_env.ts";
export type { Tool, ToolContext, ToolResult } from "./lib/tools/types.ts";
export { loadTools, toolSpecs } from "./lib/tools/registry.ts";
export { score, type ScoreOptions, type ScoreSummary } from "./stages/score.ts";
export { mask, type MaskOptions, type MaskSummary } from "./stages/mask.ts";
export { asStageFile, writeTable } from "./lib/arrow/stage_io.ts";

// Rewards (lib/score/, docs/rewards.md) and advantage estimators (lib/advantages/, docs/advantages.md).
export type { Episode, RewardContext, RewardFn, RewardResult } from "./lib/score/types.ts";
export { REWARDS } from "./lib/score/registry.ts";
export { ESTIMATOR_REGISTRY, pickEstimator } from "./lib/advantages/registry.ts";
export type { EpisodeBatch, Estimator as AdvantageEstimator } from "./lib/advantages/types.ts";
export { train, type TrainOptions, trainOptionsOf, type TrainResult } from "./stages/train.ts";
export { runLoop } from "./stages/loop.ts";
export { evaluate } from "./stages/eval.ts";
export { type EvalSummary, evalSummaryLine } from "./lib/eval/evaluate.ts";
export { renderReport } from "./lib/report/mod.ts";
export { writeReport } from "./stages/report.ts";
export { NotImplementedError, type StageArgs } from "./lib/cli/cli.ts";

// Configuration.
export * from "./lib/config/mod.ts";

// The Arrow contract between stages.
export * from "./lib/arrow/mod.ts";

// Datasets.
export * from "./lib/data/mod.ts";

// Checkpoints and model directories.
export * as safetensors from "./lib/safetensors/mod.ts";
export { type ModelDir, openModelDir, QWEN3_LINEARS, qwen3Weights } from "./lib/model/model_dir.ts";
export { type Qwen3Config, readQwen3Config } from "./lib/model/hf_config.ts";
export {
  QWEN3_06B_SHAPE_PRESET,
  type RandomQwen3Options,
  TINY_PRESET,
  writeRandomQwen3,
} from "./lib/model/random_model.ts";

// Tokenizer and chat template.
export { loadTokenizer } from "./lib/model/tokenizer.ts";
export {
  type ChatMessage,
  ChatTokenizer,
  type RenderOptions,
  type SpecialTokens,
  type ToolCall,
  type ToolSpec,
} from "./lib/model/chat.ts";

// The engine: Qwen3 on onnxruntime from graphs built here.
export { loadPolicy, type LoadPolicyOptions } from "./lib/engine/worker_policy.ts";
export { LocalPolicy } from "./lib/engine/local_policy.ts";
export type {
  BatchOptions,
  BatchStats,
  GenerateOptions,
  Generation,
  GenerationSession,
  LogprobOptions,
  Policy,
  PolicyOptions,
  PolicySequence,
  SequenceOptions,
} from "./lib/engine/policy.ts";
export { EXECUTION_PROVIDERS, type ExecutionProvider } from "./lib/engine/session.ts";

// Export for transformers.js (browser / peer), base + adapter merged.
export { exportForTransformersJs, type MergeAdapter, mergeAdapterOf } from "./lib/model/export.ts";

// LoRA adapters (PEFT format).
export {
  type Adapter,
  initLoraWeights,
  LORA_TARGET_NAMES,
  loraScale,
  type LoraSpec,
  type LoraTargetName,
  type LoraWeights,
  peftKey,
} from "./lib/model/lora.ts";
export { readPeftAdapter, writePeftAdapter } from "./lib/model/peft.ts";

// Errors.
export { UserError } from "./lib/errors.ts";
