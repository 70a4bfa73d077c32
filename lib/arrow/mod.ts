/**
 * The Arrow contract between stages: kinds, writer, reader, list-column helpers.
 *
 * ```ts
 * import { appendColumns, inheritMetadata, readStageFile, writeStageFile } from "./mod.ts";
 * const rollouts = await readStageFile("runs/x/step-0001/rollouts.arrow", "rollouts");
 * const reward = new Float32Array(rollouts.rows);
 * await writeStageFile(
 *   "runs/x/step-0001/scored.arrow",
 *   "scored",
 *   appendColumns(rollouts, "scored", { reward, turn_rewards: [], correct: [] }),
 *   inheritMetadata(rollouts, { config_hash: "…" }),
 * );
 * ```
 *
 * @module
 */

export { appendColumns, inheritMetadata } from "./append.ts";
export type { ColumnInput } from "./build.ts";
export { concatLists, FlatList, listColumn, listFromArrays } from "./columns.ts";
export {
  type ColumnDecl,
  EPISODE_STATUSES,
  type EpisodeStatus,
  findColumn,
  FORMAT_VERSION,
  isStageKind,
  type KindDecl,
  KINDS,
  type PatternDecl,
  type ResolvedKind,
  resolveKind,
  STAGE_KINDS,
  type StageKind,
  type StageName,
  TOOL_CALL_TYPE,
} from "./kinds.ts";
export { type Manifest, manifestPath } from "./manifest.ts";
export { sha256Hex } from "../fs/sha256.ts";
export { METADATA_KEYS, type MetadataInput, type StageMetadata, TOOLKIT_VERSION } from "./metadata.ts";
export { type ReadOptions, readStageFile } from "./read.ts";
export { StageFile } from "./stage_file.ts";
export { type NumericArray, sameType, t, typeName } from "./types.ts";
export { buildTable, type WriteResult, writeStageFile } from "./write.ts";
