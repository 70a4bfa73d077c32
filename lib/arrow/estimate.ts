/**
 * How large an episode file will be, estimated before any episode is sampled, so a stage can check the
 * disk has room first (lib/fs/disk_space.ts) instead of sampling everything and failing at the write.
 *
 * The estimate errs on the high side: every episode is taken to reach its token limit, each token
 * costs its per-token list entries (from the kind's declaration: 11 bytes for a rollouts file, 16 for a
 * batch) plus {@link TEXT_BYTES_PER_TOKEN} of text (the decoded trajectory in `messages`, JSON-escaped,
 * and tool outputs kept again in `tool_calls`), and each episode {@link ROW_BYTES} for its small
 * columns; the task and prompt text is added as given.
 *
 * @module
 */

import { resolveKind, type StageKind } from "./kinds.ts";
import { arrayCtorFor, isList, listItem } from "./types.ts";

/** Text bytes per token: about 4 bytes of decoded text per Qwen3 token, doubled for escaping, twice. */
export const TEXT_BYTES_PER_TOKEN = 16;

/** Ids, status, finish reason, policy version, numbers and offsets of one row. */
export const ROW_BYTES = 512;

/** Schema, metadata, footer and manifest. */
const FILE_BYTES = 64 << 10;

/**
 * An estimate, on the high side, of the bytes of a `kind` file holding `perTask` episodes of each of
 * `tasks`, every episode up to `maxTotalTokens` tokens, with the system prompt stored in each.
 */
export function episodeFileBytes(
  kind: StageKind,
  episodes: {
    tasks: readonly unknown[];
    perTask: number;
    maxTotalTokens: number;
    systemPrompt: string | null;
  },
): number {
  const resolved = resolveKind(kind);
  const perToken = [...resolved.allColumns, ...resolved.allPatterns]
    .filter((c) => c.perToken || ("name" in c && c.name === "tokens"))
    .reduce((n, c) => n + itemBytes(c.type), 0);
  const rows = episodes.tasks.length * episodes.perTask;
  const perRow = episodes.maxTotalTokens * (perToken + TEXT_BYTES_PER_TOKEN) + ROW_BYTES;
  const text = textBytes(episodes.tasks, episodes.systemPrompt) * episodes.perTask;
  return rows * perRow + text + FILE_BYTES;
}

function itemBytes(type: Parameters<typeof isList>[0]): number {
  if (!isList(type)) return 0;
  return arrayCtorFor(listItem(type))?.BYTES_PER_ELEMENT ?? 0;
}

/** UTF-8 bytes of each task's JSON twice (`task`, and the question again in `prompt_messages`) plus the system prompt. */
function textBytes(tasks: readonly unknown[], systemPrompt: string | null): number {
  const encoder = new TextEncoder();
  const prompt = encoder.encode(systemPrompt ?? "").length;
  return tasks.reduce<number>((n, task) => n + 2 * encoder.encode(JSON.stringify(task)).length + prompt, 0);
}

/** The settings a rollout's size depends on (a subset of the configuration). */
export interface RolloutSizeConfig {
  rollout: { group_size: number; generation: { max_total_tokens: number } };
  data: { system_prompt: string | null };
}

/** An estimate, on the high side, of the `kind` file (default rollouts) of one rollout over `tasks`. */
export function rolloutFileBytes(
  config: RolloutSizeConfig,
  tasks: readonly unknown[],
  kind: StageKind = "rollouts",
): number {
  return episodeFileBytes(kind, {
    tasks,
    perTask: config.rollout.group_size,
    maxTotalTokens: config.rollout.generation.max_total_tokens,
    systemPrompt: config.data.system_prompt,
  });
}
