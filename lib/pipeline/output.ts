/**
 * The one contract of the stage functions: input table(s), a Session and `{ step }` in, a stage output
 * out — its kind, its table (columns and schema metadata, exactly what the file will hold) and a summary
 * for progress lines and run metrics. `writeStageOutput` is the one writer: a stage file (atomic, with
 * its manifest), a checkpoint directory (the train stage: adapter, optimizer state, metrics.arrow), or
 * the report page. Whether the path may be written is the output policy's decision, made by the caller
 * before any work (lib/fs/output.ts).
 *
 * @module
 */

import { join } from "node:path";
import type { Table } from "apache-arrow";
import type { StageKind } from "../arrow/kinds.ts";
import { asStageFile, writeTable } from "../arrow/stage_io.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import { writeTextAtomic } from "../fs/atomic.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { type Checkpoint, saveCheckpoint } from "../train/checkpoint.ts";

/** What a stage function returns. */
export interface StageOutput<K extends StageKind = StageKind, S = unknown> {
  kind: K;
  /** The file's columns and metadata. */
  table: Table;
  summary: S;
}

/** The train stage's output: its metrics table plus the checkpoint to write around it. */
export interface CheckpointOutput<S = unknown> extends StageOutput<"metrics", S> {
  checkpoint: {
    state: Checkpoint;
    modelConfig: Qwen3Config;
    baseModel: string;
    baseConfigSha256: string;
    configHash: string;
  };
}

/** The report stage's output: one self-contained HTML page. */
export interface PageOutput {
  kind: "page";
  html: string;
  summary: { run: string };
}

export type AnyStageOutput = StageOutput | CheckpointOutput | PageOutput;

/** A stage's input: a file read from disk, a table, or the output of the stage before. */
export type StageInput = StageFile | Table | StageOutput;

/** `input` as a stage file of `kind` (tables and outputs wrapped in memory; sha256 unknown for them). */
export function stageFileOf(input: StageInput, kind: StageKind): StageFile {
  return asStageFile("table" in input && "summary" in input ? input.table : input as StageFile | Table, kind);
}

/** Writes `output` at `path`: a stage file, a checkpoint directory, or the report page. */
export async function writeStageOutput(path: string, output: AnyStageOutput): Promise<void> {
  if (output.kind === "page") return await writeTextAtomic(path, output.html);
  if ("checkpoint" in output) {
    const c = output.checkpoint;
    const info = { baseModel: c.baseModel, baseConfigSha256: c.baseConfigSha256, configHash: c.configHash };
    return await saveCheckpoint(path, c.state, c.modelConfig, info, async (tmp) => {
      await writeTable(join(tmp, "metrics.arrow"), "metrics", output.table);
    });
  }
  await writeTable(path, output.kind, output.table);
}
