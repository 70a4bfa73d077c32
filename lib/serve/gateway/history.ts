/**
 * Token in, token out for a client that sends its whole history each turn (docs/agents.md): the request's
 * messages are checked against what the episode recorded — the prompt messages, each reply as the
 * gateway sent it, each answer the client gave — and only the messages after the last reply are new. Those
 * are rendered as the chat template's own pieces (tool results as one `<tool_response>` user turn, or one
 * user message) and appended to the recorded tokens, exactly as the rollout stage appends an environment's
 * answer (lib/rollout/episode.ts `renderAnswer`). Nothing recorded is re-rendered.
 *
 * A reply matches when its content (trimmed) and its calls (names, and arguments as parsed JSON, so a
 * client that re-serializes them still matches) are the ones sent. Its reasoning is not compared: clients
 * drop or keep it as they like, and Qwen3's template drops it when it renders history, while the recorded
 * tokens keep it, as the rollout stage's do (docs/rollouts.md, rule 4).
 *
 * @module
 */

import type { ChatMessage, ChatTokenizer } from "../../model/chat.ts";
import type { EnvMessage } from "../../rollout/environment.ts";
import { renderAnswer } from "../../rollout/episode.ts";

type Json = Record<string, unknown>;

/** What an episode recorded of the conversation, in the client's order. */
export interface RecordedHistory {
  promptMessages: ChatMessage[];
  /** Per turn: the reply as sent (OpenAI message) and the client's answer to it (empty for the last). */
  turns: Array<{ reply: Json; answer: EnvMessage[] }>;
}

/** The new messages of a request, or why its history is not the recorded one. */
export type Continuation =
  | { ok: true; answer: EnvMessage[] }
  | { ok: false; why: string };

/** Checks `messages` (read as chat_render.ts reads them) against `history`; returns the new tail. */
export function continuation(history: RecordedHistory, messages: readonly ChatMessage[]): Continuation {
  const p = history.promptMessages.length;
  for (let i = 0; i < p; i++) {
    if (!sameMessage(messages[i], history.promptMessages[i])) {
      return { ok: false, why: `message ${i} changed` };
    }
  }
  // A retry of the first turn (its sampling failed): the prompt again, nothing new.
  if (history.turns.length === 0) {
    return messages.length === p ? { ok: true, answer: [] } : { ok: false, why: "the prompt changed" };
  }
  let at = p;
  for (const [j, turn] of history.turns.entries()) {
    const m = messages[at];
    if (!m || m.role !== "assistant") return { ok: false, why: `the reply of turn ${j + 1} is missing` };
    if (!sameReply(m, turn.reply)) return { ok: false, why: `the reply of turn ${j + 1} was edited` };
    at += 1;
    const last = j === history.turns.length - 1;
    if (last) break;
    for (const [k, answer] of turn.answer.entries()) {
      if (!sameMessage(messages[at + k], answer)) {
        return { ok: false, why: `message ${at + k} (the answer to turn ${j + 1}) changed` };
      }
    }
    at += turn.answer.length;
  }
  const rest = messages.slice(at);
  const answer = rest.map(envMessage);
  if (answer.some((m) => m === null) || answer.length === 0) {
    return {
      ok: false,
      why: "the messages after the last reply are not its tool results or one user message",
    };
  }
  return { ok: true, answer: answer as EnvMessage[] };
}

/** The tokens the template appends for `answer`, through the next assistant header. */
export function answerTokens(
  tokenizer: ChatTokenizer,
  answer: readonly EnvMessage[],
  thinking: boolean,
  closeTurn: boolean,
): number[] | string {
  const neutral = answer.map((m) => ({ ...m, content: tokenizer.neutralizeSpecial(m.content) }));
  try {
    return renderAnswer(tokenizer, neutral, thinking, closeTurn);
  } catch (e) {
    return (e as Error).message;
  }
}

function envMessage(m: ChatMessage): EnvMessage | null {
  if (m.role === "tool") return { role: "tool", name: m.name ?? "", content: m.content };
  if (m.role === "user") return { role: "user", content: m.content };
  return null;
}

/** Whether two answers to a turn are the same messages. */
export function sameAnswer(a: readonly EnvMessage[], b: readonly EnvMessage[]): boolean {
  return a.length === b.length && a.every((m, i) => sameMessage(m, b[i]));
}

function sameMessage(a: ChatMessage | EnvMessage | undefined, b: ChatMessage | EnvMessage): boolean {
  return a !== undefined && a.role === b.role && a.content === b.content;
}

function sameReply(m: ChatMessage, reply: Json): boolean {
  if ((m.content ?? "").trim() !== String(reply.content ?? "").trim()) return false;
  const sent = (reply.tool_calls as Json[] | undefined) ?? [];
  const back = m.tool_calls ?? [];
  if (sent.length !== back.length) return false;
  return sent.every((s, i) => {
    const f = s.function as { name: string; arguments: string };
    const g = back[i].function;
    return f.name === g.name && JSON.stringify(parsed(f.arguments)) === JSON.stringify(parsed(g.arguments));
  });
}

function parsed(args: unknown): unknown {
  if (typeof args !== "string") return args;
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}
