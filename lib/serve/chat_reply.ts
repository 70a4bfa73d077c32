/**
 * The assistant message of a sampled chat turn, as vLLM builds it with `--reasoning-parser qwen3` and
 * `--tool-call-parser hermes` (docs/serving.md, "Reasoning and tool calls"):
 *
 * 1. Reasoning (vLLM's Qwen3 reasoning parser): the first `<think>` and anything before it are dropped;
 *    the text before the first `</think>` is `reasoning` and the rest is the content (null when empty).
 *    Without `</think>`, the whole text is reasoning when thinking is on (the turn ended while thinking), and content when the
 *    request turned thinking off (`chat_template_kwargs.enable_thinking: false`).
 * 2. Tool calls (vLLM's Hermes parser, lib/rollout/tool_calls.ts `extractToolCalls`), only when the
 *    request has tools and `tool_choice` is `auto` (or absent): every call or none. With calls, the
 *    content is the text before the first `<tool_call>` (null when empty) and the finish reason
 *    `tool_calls`; when any block does not parse, no calls and the content unchanged.
 *
 * The field is `reasoning`, as vLLM names it since `reasoning_content` was removed (docs/serving.md).
 *
 * @module
 */

import { type ExtractedCall, extractToolCalls } from "../rollout/tool_calls.ts";

type Json = Record<string, unknown>;

const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";

/** How a reply is read. */
export interface ReplyOptions {
  /** Whether Hermes tool calls are extracted (the request has tools, `tool_choice` auto). */
  parseTools: boolean;
  /** Whether thinking is on (Qwen3's default; false when the request turned it off). */
  thinking: boolean;
}

/** Reasoning and content of a turn's text, as vLLM's Qwen3 reasoning parser splits them. */
export function splitReasoning(
  text: string,
  thinking: boolean,
): { reasoning: string | null; content: string | null } {
  const open = text.indexOf(THINK_OPEN);
  const rest = open >= 0 ? text.slice(open + THINK_OPEN.length) : text; // vLLM drops what precedes it
  const close = rest.indexOf(THINK_CLOSE);
  if (close >= 0) {
    const content = rest.slice(close + THINK_CLOSE.length);
    return { reasoning: rest.slice(0, close), content: content.length > 0 ? content : null };
  }
  return thinking ? { reasoning: rest, content: null } : { reasoning: null, content: rest };
}

/** An OpenAI tool call of a parsed Hermes block. */
export function openAiToolCall(call: Pick<ExtractedCall, "name" | "argumentsText">): Json {
  return {
    id: `chatcmpl-tool-${crypto.randomUUID().replaceAll("-", "")}`,
    type: "function",
    function: { name: call.name, arguments: call.argumentsText },
  };
}

/**
 * The message of a turn's text (the final stop token already removed) and whether it called tools.
 * `reasoning` is present (null when none) and `tool_calls` is a list, as vLLM answers.
 */
export function assistantMessage(text: string, options: ReplyOptions): { message: Json; called: boolean } {
  const { reasoning, content } = splitReasoning(text, options.thinking);
  const message: Json = { role: "assistant", content, reasoning, tool_calls: [] };
  if (!options.parseTools || content === null) return { message, called: false };
  const extracted = extractToolCalls(content);
  if (extracted.calls.length === 0) return { message, called: false };
  message.content = extracted.content;
  message.tool_calls = extracted.calls.map(openAiToolCall);
  return { message, called: true };
}
