/**
 * Episodes as the columns of rollouts.arrow (declared in lib/arrow/kinds.ts). Per-token lists are built
 * from one flat typed array each (no per-element conversion).
 *
 * @module
 */

import { listFromArrays } from "../arrow/columns.ts";
import type { ColumnInput } from "../arrow/build.ts";
import type { Episode } from "./rollout.ts";

/** The rollouts.arrow columns of `episodes`, in row order. */
export function rolloutColumns(episodes: readonly Episode[]): Record<string, ColumnInput> {
  const of = <T>(f: (e: Episode) => T) => episodes.map(f);
  return {
    episode_id: of((e) => e.episodeId),
    task_id: of((e) => e.taskId),
    group_id: Int32Array.from(of((e) => e.groupId)),
    sample_idx: Int32Array.from(of((e) => e.sampleIdx)),
    task: of((e) => JSON.stringify(e.task)),
    prompt_messages: of((e) => JSON.stringify(e.promptMessages)),
    messages: of((e) => JSON.stringify(e.messages)),
    tokens: listFromArrays(of((e) => e.tokens), Int32Array),
    prompt_len: Int32Array.from(of((e) => e.promptLen)),
    sampled: listFromArrays(of((e) => e.sampled), Uint8Array),
    logprobs: listFromArrays(of((e) => e.logprobs), Float32Array),
    turn_idx: listFromArrays(of((e) => e.turnIdx), Int16Array),
    tool_calls: of((e) => e.toolCalls.map((c) => ({ ...c }))),
    num_turns: Int16Array.from(of((e) => e.numTurns)),
    finish_reason: of((e) => e.finishReason),
    status: of((e) => e.status),
    policy_version: of((e) => e.policyVersion),
  };
}
