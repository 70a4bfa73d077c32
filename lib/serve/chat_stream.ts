/**
 * The deltas of a streamed chat choice, built so that they concatenate to the unstreamed message
 * (chat_reply.ts): reasoning and content are sent as soon as they are certain (a suffix that could be
 * the start of `<think>`, `</think>` or `<tool_call>` waits), and everything from the first `<tool_call>`
 * on waits for the end of the turn, when the calls are parsed all or nothing: the calls are sent whole
 * (one delta per call, with its arguments complete), or, when they do not parse, the held text as
 * content. vLLM streams a call's arguments piece by piece; here they come in one piece.
 *
 * @module
 */

import { type ReplyOptions, splitReasoning } from "./chat_reply.ts";

type Json = Record<string, unknown>;

const TAGS = ["<think>", "</think>", "<tool_call>"];

export class ChatDeltas {
  readonly #options: ReplyOptions;
  #text = "";
  #sentReasoning = 0;
  #sentContent = 0;

  constructor(options: ReplyOptions) {
    this.#options = options;
  }

  /** Takes the next piece of the reply's text; returns the delta to send now (null: nothing yet). */
  push(piece: string): Json | null {
    this.#text += piece;
    const safe = this.#text.slice(0, this.#text.length - tagHoldBack(this.#text));
    // As vLLM's stream does, the `<think>` tag is dropped but text before it stays reasoning (the
    // unstreamed reply drops that text: the one place where the two differ).
    const { reasoning, content } = splitReasoning(safe.replace("<think>", ""), this.#options.thinking);
    const callAt = this.#options.parseTools ? content?.indexOf("<tool_call>") ?? -1 : -1;
    return this.#delta(reasoning, callAt >= 0 ? content!.slice(0, callAt) : content);
  }

  /** The last delta, from the finished message (its content, reasoning and tool calls). */
  finish(message: Json): Json | null {
    const delta = this.#delta(message.reasoning as string | null, message.content as string | null) ?? {};
    const calls = message.tool_calls as Json[];
    if (calls.length > 0) {
      delta.tool_calls = calls.map((c, index) => ({ index, ...c }));
    }
    return Object.keys(delta).length > 0 ? delta : null;
  }

  #delta(reasoning: string | null, content: string | null): Json | null {
    const out: Json = {};
    if (reasoning && reasoning.length > this.#sentReasoning) {
      out.reasoning = reasoning.slice(this.#sentReasoning);
      this.#sentReasoning = reasoning.length;
    }
    if (content && content.length > this.#sentContent) {
      out.content = content.slice(this.#sentContent);
      this.#sentContent = content.length;
    }
    return Object.keys(out).length > 0 ? out : null;
  }
}

/** Characters at the end of `text` that begin one of the tags. */
function tagHoldBack(text: string): number {
  for (let n = Math.min(text.length, 10); n > 0; n--) {
    const tail = text.slice(text.length - n);
    if (TAGS.some((t) => t.length > n && t.startsWith(tail))) return n;
  }
  return 0;
}
