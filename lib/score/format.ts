/**
 * `format`: 1 when every assistant turn is well formed, else 0 with the first problem as status.
 *
 * Rules, checked turn by turn in order:
 * - `truncated`: the episode was cut inside a turn (finish_reason `length`);
 * - `bad_think`: a `<think>` that is not at the start of the turn, more than one `<think>` or
 *   `</think>`, or a `</think>` without its `<think>`;
 * - `unclosed_think`: a `<think>` never closed;
 * - `bad_tool_call`: a `<tool_call>` block the rollout's parser rejects (unclosed, not JSON, no name);
 * - `text_after_answer`: in the final turn, anything but whitespace or a period after the final answer
 *   (`#### N`, `\boxed{}`, "Final answer:"; see answer.ts);
 * - `empty`: the final turn shows nothing outside its reasoning.
 * Status `ok` otherwise. With thinking disabled the turns have no `<think>` and pass the first rules.
 *
 * @module
 */

import { turnText } from "../rollout/assistant_message.ts";
import { parseToolCalls } from "../rollout/tool_calls.ts";
import { findAnswer, visibleText } from "./answer.ts";
import type { RewardFn, RewardResult } from "./types.ts";

const OPEN = "<think>";
const CLOSE = "</think>";

function count(text: string, needle: string): number {
  let n = 0;
  for (let at = text.indexOf(needle); at >= 0; at = text.indexOf(needle, at + needle.length)) n++;
  return n;
}

/** The think-structure problem of one turn, or undefined. */
export function thinkProblem(content: string): string | undefined {
  const opens = count(content, OPEN);
  const closes = count(content, CLOSE);
  if (opens === 0 && closes === 0) return undefined;
  if (opens > 1 || closes > 1 || !content.trimStart().startsWith(OPEN)) return "bad_think";
  if (closes === 0) return "unclosed_think";
  return undefined;
}

/** The problem of the final answer's placement, or undefined. */
export function answerProblem(content: string): string | undefined {
  const visible = visibleText(content);
  if (!visible) return "empty";
  const span = findAnswer(visible);
  if (span && !/^[\s.]*$/.test(visible.slice(span.end))) return "text_after_answer";
  return undefined;
}

/** The first format problem of an episode's assistant turns, or `ok`. */
export function formatStatus(turns: readonly string[], finishReason: string): string {
  // Cut by a token limit: a turn at max_new_tokens (`length`), or the episode at max_total_tokens
  // (`truncated`: inside its last turn, or before the next, where the answer was never written).
  if (finishReason === "length" || finishReason === "truncated") return "truncated";
  for (const content of turns) {
    const think = thinkProblem(content);
    if (think) return think;
    if (parseToolCalls(content).some((c) => !c.ok)) return "bad_tool_call";
  }
  return (turns.length && answerProblem(turns[turns.length - 1])) || "ok";
}

export const format: RewardFn = {
  name: "format",
  doc: "1 when the <think> and <tool_call> structure is well formed and nothing follows the final answer",
  score(episode): RewardResult {
    const turns = episode.messages.filter((m) => m?.role === "assistant").map(turnText);
    const status = formatStatus(turns, episode.finishReason);
    return { value: status === "ok" ? 1 : 0, status };
  },
};
