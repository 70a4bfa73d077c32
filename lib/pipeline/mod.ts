/**
 * The pipeline layer: the stage functions with one contract — input table(s), a Session and
 * `{ step }` → a stage output (kind, table, summary) that `writeStageOutput` writes — and the Session
 * that holds what a run opens once. `stages/*.ts` only parse, open, call and write; the loop, the
 * evaluation and the demo call these functions (docs/DESIGN.md, "Layers").
 *
 * @module
 */

export { openSession, Session, type SessionOptions, type TaskSplit } from "./session.ts";
export {
  type AnyStageOutput,
  type CheckpointOutput,
  type PageOutput,
  stageFileOf,
  type StageInput,
  type StageOutput,
  writeStageOutput,
} from "./output.ts";
export { rollout, type RolloutOutput, type RolloutRequest, type RolloutSummary } from "./rollout.ts";
export { score, type ScoreSummary } from "./score.ts";
export { mask, type MaskSummary } from "./mask.ts";
export { stepLine, stepSettingsOf, train, type TrainRequest, type TrainSummary } from "./train.ts";
export { type EvalRequest, type EvalSummary, evalSummaryLine, evaluate } from "./evaluate.ts";
export { compareReport, report } from "./report.ts";
