/**
 * A chat request's prompt tokens: the messages (content as a string or a list of text parts; the
 * `developer` role read as `system`; an assistant's `reasoning` passed to the template as Qwen3's
 * `reasoning_content`) and tools rendered by the model's own chat template, with
 * `chat_template_kwargs.enable_thinking`, `add_generation_prompt` and `continue_final_message`; then
 * the tokens `tool_choice` forces (docs/serving.md, "Tool choice").
 *
 * @module
 */

import type { ChatMessage, ChatTokenizer, ToolSpec } from "../model/chat.ts";
import { HttpError } from "./limits.ts";
import { flag } from "./request.ts";

type Json = Record<string, unknown>;

const ROLES = new Set(["system", "developer", "user", "assistant", "tool"]);

/** How the reply is to be read: thinking, tool parsing and the forced start of the turn. */
export interface ChatSetup {
  prompt: number[];
  thinking: boolean;
  /** Hermes calls are parsed (tools present, tool_choice not none). */
  parseTools: boolean;
  /** `required` or a tool's name: the reply must hold a call (forced by `forced`). */
  mustCall: string | null;
  /** Text appended to the prompt as the start of the reply (part of the reply's text). */
  forced: string;
  /**
   * The forced call, guided to a well-formed call of one of `tools` (the named one, or all for
   * `required`): its body so far (`forced` after `<tool_call>`). Null without a forced call.
   */
  forcedCall: { tools: ToolSpec[]; body: string } | null;
  /** Keep only the first call (`parallel_tool_calls: false`). */
  firstCallOnly: boolean;
}

/** Renders the request's conversation (and checks `tool_choice`). */
export function renderChat(tokenizer: ChatTokenizer, body: Json): ChatSetup {
  const kwargs = templateKwargs(body.chat_template_kwargs);
  const thinking = kwargs.enable_thinking !== false;
  const tools = toolsOf(body.tools);
  const choice = toolChoice(body.tool_choice, tools);
  const continueFinal = flag(body, "continue_final_message", false);
  const generation = flag(body, "add_generation_prompt", !continueFinal);
  if (continueFinal && generation) {
    throw new HttpError(
      400,
      "continue_final_message needs add_generation_prompt false",
      undefined,
      "continue_final_message",
    );
  }
  const messages = messagesOf(body.messages);
  let text: string;
  try {
    text = tokenizer.renderChat(messages, {
      tools: tools.length > 0 ? tools : undefined,
      addGenerationPrompt: generation,
      enableThinking: kwargs.enable_thinking,
    });
  } catch (e) {
    throw new HttpError(
      400,
      `the chat template could not render the messages: ${(e as Error).message}`,
      undefined,
      "messages",
    );
  }
  if (continueFinal) text = openFinalMessage(text, messages);
  const mustCall = choice === "auto" || choice === "none" ? null : choice; // "required" or a tool's name
  const forced = mustCall === null ? "" : forcedStart(mustCall, thinking && generation);
  return {
    forcedCall: mustCall === null ? null : {
      tools: mustCall === "required" ? tools : tools.filter((t) => t.function.name === mustCall),
      body: forced.slice(forced.indexOf(CALL_OPEN) + CALL_OPEN.length),
    },
    prompt: tokenizer.encode(text + forced),
    thinking,
    parseTools: tools.length > 0 && choice !== "none",
    mustCall,
    forced,
    firstCallOnly: body.parallel_tool_calls === false,
  };
}

/**
 * What `tool_choice` forces at the start of the turn: Qwen3's empty reasoning block when thinking is on
 * (a forced call skips reasoning; the template renders the same block when thinking is off), then the
 * call's opening, and for a named tool its name and `"arguments": `.
 */
function forcedStart(mustCall: string, thinkingOpen: boolean): string {
  const think = thinkingOpen ? "<think>\n\n</think>\n\n" : "";
  const name = mustCall === "required" ? "" : `${mustCall}", "arguments": `;
  return `${think}${CALL_OPEN}\n{"name": "${name}`;
}

const CALL_OPEN = "<tool_call>";

function templateKwargs(kwargs: unknown): { enable_thinking?: boolean } {
  if (kwargs === undefined || kwargs === null) return {};
  if (typeof kwargs !== "object" || Array.isArray(kwargs)) {
    throw new HttpError(400, "chat_template_kwargs must be an object", undefined, "chat_template_kwargs");
  }
  for (const [key, value] of Object.entries(kwargs)) {
    if (key !== "enable_thinking" || typeof value !== "boolean") {
      throw new HttpError(
        400,
        `chat_template_kwargs.${key} is not supported; the only one is enable_thinking (true or false)`,
        undefined,
        "chat_template_kwargs",
      );
    }
  }
  return kwargs as { enable_thinking?: boolean };
}

function toolsOf(tools: unknown): ToolSpec[] {
  if (tools === undefined || tools === null) return [];
  const ok = Array.isArray(tools) &&
    tools.every((t) =>
      t && typeof t === "object" && (t as Json).type === "function" &&
      typeof ((t as Json).function as Json | undefined)?.name === "string"
    );
  if (!ok) {
    throw new HttpError(
      400,
      'tools must be a list of {"type": "function", "function": {"name", ...}}',
      undefined,
      "tools",
    );
  }
  return tools as ToolSpec[];
}

/** "none" | "auto" | "required" | a tool name. */
function toolChoice(choice: unknown, tools: ToolSpec[]): string {
  if (choice === undefined || choice === null) return tools.length > 0 ? "auto" : "none";
  if (choice === "none" || choice === "auto" || choice === "required") {
    if (choice !== "none" && tools.length === 0) {
      throw new HttpError(400, `tool_choice ${choice} needs tools`, undefined, "tool_choice");
    }
    return choice;
  }
  const name = ((choice as Json)?.function as Json | undefined)?.name;
  if ((choice as Json)?.type !== "function" || typeof name !== "string") {
    throw new HttpError(
      400,
      'tool_choice must be none, auto, required or {"type": "function", "function": {"name"}}',
      undefined,
      "tool_choice",
    );
  }
  const offered = tools.map((t) => t.function.name);
  if (!offered.includes(name)) {
    throw new HttpError(
      400,
      `tool_choice names ${JSON.stringify(name)}, which is not among the tools (${
        offered.map((n) => JSON.stringify(n)).join(", ") || "none"
      }); name one of them, or use tool_choice "required" or "auto"`,
      undefined,
      "tool_choice",
    );
  }
  return name;
}

/** The request's messages as the template reads them (roles, text content, reasoning). */
export function messagesOf(messages: unknown): ChatMessage[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new HttpError(400, "messages must be a non-empty list", undefined, "messages");
  }
  return messages.map((m, i) => {
    if (!m || typeof m !== "object" || !ROLES.has((m as Json).role as string)) {
      throw new HttpError(
        400,
        `messages[${i}].role must be one of ${[...ROLES].join(", ")}`,
        undefined,
        "messages",
      );
    }
    const { role, content, reasoning, reasoning_content: legacy, ...rest } = m as Json;
    const out: Json = {
      ...rest,
      role: role === "developer" ? "system" : role,
      content: contentText(content, i),
    };
    const thought = reasoning ?? legacy;
    if (typeof thought === "string") out.reasoning_content = thought;
    return out as unknown as ChatMessage;
  });
}

/** A message's content: a string, null, or text parts joined by newlines (as vLLM joins them). */
function contentText(content: unknown, i: number): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  const parts = Array.isArray(content) ? content : null;
  if (!parts || parts.some((p) => (p as Json)?.type !== "text" || typeof (p as Json).text !== "string")) {
    throw new HttpError(
      400,
      `messages[${i}].content must be a string or a list of {"type": "text", "text"} parts (this model reads text only)`,
      undefined,
      "messages",
    );
  }
  return parts.map((p) => (p as Json).text as string).join("\n");
}

/** The rendered conversation cut right after the last message's content, so the reply continues it. */
function openFinalMessage(text: string, messages: ChatMessage[]): string {
  const last = messages[messages.length - 1];
  const at = typeof last.content === "string" ? text.lastIndexOf(last.content) : -1;
  if (last.role !== "assistant" || at < 0 || last.content === "") {
    throw new HttpError(
      400,
      "continue_final_message needs a final assistant message with content",
      undefined,
      "continue_final_message",
    );
  }
  return text.slice(0, at + (last.content as string).length);
}
