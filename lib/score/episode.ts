/**
 * Reads the rows of a rollouts table into `Episode`s for the rewards: task and messages parsed from
 * JSON, tool calls from the struct list read column by column (no per-row struct objects).
 *
 * @module
 */

import type { Vector } from "apache-arrow";
import { UserError } from "../errors.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import type { Task } from "../data/task.ts";
import { turnText } from "../rollout/assistant_message.ts";
import type { Episode, EpisodeMessage, ToolCallRecord } from "./types.ts";

/** Tool calls of every row: row i's calls are `calls[offsets[i] .. offsets[i + 1])`. */
export interface ToolCallColumns {
  offsets: Int32Array;
  turn: Int16Array;
  status: string[];
  /** Full records, built on demand (names, arguments and outputs are only decoded when asked). */
  record(k: number): ToolCallRecord;
}

/** The `tool_calls` column as flat arrays (one entry per call). */
export function toolCallColumns(file: StageFile): ToolCallColumns {
  const vector = file.vector("tool_calls");
  const data = vector.data.length === 1 ? vector.data[0] : undefined;
  if (!data || data.offset !== 0) return slowToolCalls(file);
  const offsets = data.valueOffsets as Int32Array;
  const struct = data.children[0];
  const child = (name: string) => {
    const at = struct.type.children.findIndex((f: { name: string }) => f.name === name);
    return struct.children[at];
  };
  const turnData = child("turn");
  const turn = (turnData.values as Int16Array).subarray(turnData.offset, turnData.offset + struct.length);
  const texts = (name: string) => {
    const d = child(name);
    return (k: number): string => utf8At(d.valueOffsets as Int32Array, d.values as Uint8Array, d.offset + k);
  };
  const statusOf = texts("status");
  const status = Array.from({ length: struct.length }, (_, k) => statusOf(k));
  const name = texts("name");
  const args = texts("arguments");
  const output = texts("output");
  const msData = child("ms");
  const ms = msData.values as Float32Array;
  return {
    offsets,
    turn,
    status,
    record: (k) => ({
      turn: turn[k],
      name: name(k),
      arguments: args(k),
      status: status[k],
      output: output(k),
      ms: ms[msData.offset + k],
    }),
  };
}

const decoder = new TextDecoder();
function utf8At(offsets: Int32Array, bytes: Uint8Array, k: number): string {
  return decoder.decode(bytes.subarray(offsets[k], offsets[k + 1]));
}

/** Several chunks or a slice (files written elsewhere): go through Arrow's row objects. */
function slowToolCalls(file: StageFile): ToolCallColumns {
  const rows = file.column("tool_calls") as ToolCallRecord[][];
  const offsets = new Int32Array(rows.length + 1);
  rows.forEach((r, i) => (offsets[i + 1] = offsets[i] + r.length));
  const all = rows.flat();
  return {
    offsets,
    turn: Int16Array.from(all, (c) => c.turn),
    status: all.map((c) => c.status),
    record: (k) => all[k],
  };
}

/** Reads every episode of a rollouts (or later) file. */
export function readEpisodes(file: StageFile): Episode[] {
  const calls = toolCallColumns(file);
  const ids = file.vector("episode_id");
  const groups = file.vector("group_id");
  const finish = file.vector("finish_reason");
  const turns = file.vector("num_turns");
  const episodes: Episode[] = [];
  for (let row = 0; row < file.rows; row++) {
    const messages = parseMessages(file, row);
    const toolCalls: ToolCallRecord[] = [];
    for (let k = calls.offsets[row]; k < calls.offsets[row + 1]; k++) toolCalls.push(calls.record(k));
    episodes.push({
      row,
      episodeId: String(ids.get(row)),
      groupId: Number(groups.get(row)),
      task: file.json("task", row) as Task,
      messages,
      finalText: lastAssistant(messages),
      toolCalls,
      finishReason: String(finish.get(row)),
      numTurns: Number((turns as Vector).get(row)),
      sampledTokens: sumOf(file.listAt("sampled", row)),
    });
  }
  return episodes;
}

function parseMessages(file: StageFile, row: number): EpisodeMessage[] {
  const messages = file.json("messages", row);
  if (!Array.isArray(messages)) {
    throw new UserError(`stage file ${file.path}: column "messages" row ${row}`, {
      why: "it is not a JSON array of chat messages",
      fix: "re-run stage rollout (deno task rollout) to rewrite it",
    });
  }
  return messages as EpisodeMessage[];
}

function lastAssistant(messages: EpisodeMessage[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === "assistant") return turnText(messages[i]);
  }
  return "";
}

function sumOf(values: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < values.length; i++) sum += values[i];
  return sum;
}
