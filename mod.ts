/**
 * deno-rl: GRPO for Qwen3 tool use, in TypeScript on Deno.
 *
 * The public API for notebooks and scripts: the pipeline's stage functions and the Session they share
 * (the stage scripts in `stages/*.ts` are only their command lines), and the library pieces the stages
 * stand on.
 *
 * ```ts
 * import { loadConfig, mask, openSession, readStageFile, rollout, score, train } from "./mod.ts";
 * const { config, hash } = await loadConfig();
 * const session = openSession(config, hash); // opens the model, tools and trainer when first asked
 * const tasks = (await session.tasks()).train.slice(0, 4);
 * const rolled = await rollout(session, tasks, { step: 1 }); // rolled.table: the rollouts columns
 * const batch = mask(session, await score(session, rolled, { step: 1 }), { step: 1 });
 * const trained = await train(session, batch, { step: 1 }); // the adapter changed in memory
 * await session.close();
 * const earlier = await readStageFile("runs/x/scored.arrow", "scored");
 * ```
 *
 * @module
 */

// The pipeline: a Session per run and the stage functions (lib/pipeline/, docs/DESIGN.md).
export {
  type AnyStageOutput,
  type CheckpointOutput,
  type EvalRequest,
  type EvalSummary,
  evalSummaryLine,
  evaluate,
  mask,
  type MaskSummary,
  openSession,
  type PageOutput,
  report,
  rollout,
  type RolloutOutput,
  type RolloutRequest,
  type RolloutSummary,
  score,
  type ScoreSummary,
  Session,
  type SessionOptions,
  stageFileOf,
  type StageInput,
  type StageOutput,
  stepSettingsOf,
  type TaskSplit,
  train,
  type TrainRequest,
  type TrainSummary,
  writeStageOutput,
} from "./lib/pipeline/mod.ts";
export { runLoop } from "./lib/run/loop.ts";
export { demo, type DemoOptions } from "./lib/demo/run.ts";
export type { DemoSummary } from "./lib/demo/result.ts";
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
export { loadTools, type ToolSet, toolSpecs } from "./lib/tools/registry.ts";
export { asStageFile, writeTable } from "./lib/arrow/stage_io.ts";

// Rewards (lib/score/, docs/rewards.md) and advantage estimators (lib/advantages/, docs/advantages.md).
export type { Episode, RewardContext, RewardFn, RewardResult } from "./lib/score/types.ts";
export { REWARDS } from "./lib/score/registry.ts";
export { ESTIMATOR_REGISTRY, pickEstimator } from "./lib/advantages/registry.ts";
export type { EpisodeBatch, Estimator as AdvantageEstimator } from "./lib/advantages/types.ts";
export { renderReport } from "./lib/report/mod.ts";

// Configuration.
export * from "./lib/config/mod.ts";

// The Arrow contract between stages.
export * from "./lib/arrow/mod.ts";

// Datasets.
export * from "./lib/data/mod.ts";

// Checkpoints and model directories.
export * as safetensors from "./lib/safetensors/mod.ts";
export { type ModelDir, openModelDir, QWEN3_LINEARS, qwen3Weights } from "./lib/model/model_dir.ts";
export { loadSharedWeights, type SharedWeights } from "./lib/model/shared_weights.ts";
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
export { EXECUTION_PROVIDERS, type ExecutionProvider } from "./lib/ort/providers.ts";

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
export { InfrastructureError, UserError } from "./lib/errors.ts";
export { McpServerError } from "./lib/tools/mcp/errors.ts";
