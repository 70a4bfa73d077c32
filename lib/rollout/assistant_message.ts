/**
 * The assistant message of a sampled turn in OpenAI's convention (docs/rollouts.md, "messages"), as
 * vLLM returns it with Qwen3's reasoning parser and the Hermes tool parser:
 *
 * - the turn's `<think>…</think>` block becomes `reasoning_content` (the name Qwen3's chat template
 *   reads, so a re-render keeps it), split at the first `</think>` as vLLM's Qwen3 parser splits;
 * - when `tool_calls` holds the turn's parsed calls, their `<tool_call>` blocks are cut out of `content`
 *   and the rest is trimmed: the template writes each call from `tool_calls`, so a re-render through it
 *   (SFT data, a judge, another server) writes every call once.
 *
 * Unlike vLLM, nothing is dropped, so `turnText` gives back what rewards read: a turn that does not
 * start with `<think>`, or never closes it (cut at `max_new_tokens`), keeps all its text in `content`;
 * prose after the calls and blocks that did not parse stay in `content`. The tokens, not these
 * messages, are what training reads.
 *
 * @module
 */

import type { ChatMessage, ToolCall } from "../model/chat.ts";
import { removeToolCalls } from "./tool_calls.ts";

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";

/** The message of one assistant turn's decoded text (without its end-of-turn token). */
export function turnMessage(text: string, toolCalls?: readonly ToolCall[]): ChatMessage {
  const { reasoning, rest } = splitThink(text);
  const called = toolCalls !== undefined && toolCalls.length > 0;
  const message: ChatMessage = { role: "assistant", content: called ? removeToolCalls(rest).trim() : rest };
  if (reasoning !== undefined) message.reasoning_content = reasoning;
  if (called) message.tool_calls = [...toolCalls];
  return message;
}

/**
 * The turn's text as rewards read it: the reasoning back in its `<think>` block before the content (the
 * content as it is for messages without `reasoning_content`, e.g. files written before the split).
 */
export function turnText(message: { content?: unknown; reasoning_content?: unknown }): string {
  const content = String(message.content ?? "");
  const reasoning = message.reasoning_content;
  return typeof reasoning === "string" ? `${THINK_OPEN}${reasoning}${THINK_CLOSE}${content}` : content;
}

/** The reasoning of a turn that starts with a closed `<think>` block, and the text after it. */
function splitThink(text: string): { reasoning?: string; rest: string } {
  if (!text.startsWith(THINK_OPEN)) return { rest: text };
  const close = text.indexOf(THINK_CLOSE);
  if (close < 0) return { rest: text };
  return { reasoning: text.slice(THINK_OPEN.length, close), rest: text.slice(close + THINK_CLOSE.length) };
}
