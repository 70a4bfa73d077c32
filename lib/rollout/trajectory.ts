/**
 * An episode's growing token sequence with each token's provenance: `sampled` (1 = sampled by the
 * policy), its log-prob (0 where not sampled) and its turn (0 = the prompt; j = sampled in assistant turn
 * j, or appended by the environment after turn j) — plus the decoded conversation for `messages`.
 *
 * @module
 */

import type { ChatMessage, ToolCall } from "../model/chat.ts";
import { turnMessage } from "./assistant_message.ts";
import type { ToolCallRecord } from "./dispatch.ts";
import type { EnvMessage } from "./environment.ts";

/**
 * Everything a rollouts.arrow row holds about one episode, before the ids the driver adds
 * (what `Trajectory.finish` returns).
 */
export interface EpisodeResult {
  promptMessages: ChatMessage[];
  messages: ChatMessage[];
  tokens: number[];
  promptLen: number;
  sampled: number[];
  logprobs: number[];
  turnIdx: number[];
  toolCalls: ToolCallRecord[];
  numTurns: number;
  finishReason: string;
  status: string;
}

export class Trajectory {
  readonly #promptMessages: ChatMessage[];
  readonly #promptLen: number;
  readonly #tokens: number[];
  readonly #sampled: number[];
  readonly #logprobs: number[];
  readonly #turnIdx: number[];
  readonly #messages: ChatMessage[];
  #turns = 0;

  constructor(prompt: readonly number[], promptMessages: ChatMessage[]) {
    this.#promptMessages = promptMessages;
    this.#promptLen = prompt.length;
    this.#tokens = [...prompt];
    this.#sampled = new Array(prompt.length).fill(0);
    this.#logprobs = new Array(prompt.length).fill(0);
    this.#turnIdx = new Array(prompt.length).fill(0);
    this.#messages = [...promptMessages];
  }

  get length(): number {
    return this.#tokens.length;
  }

  /** The sequence so far. */
  get tokens(): readonly number[] {
    return this.#tokens;
  }

  /** Tokens sampled in assistant turn `turn`, with their log-probs. */
  addTurn(turn: number, tokens: readonly number[], logprobs: readonly number[]): void {
    this.#push(tokens, 1, logprobs, turn);
    this.#turns = turn;
  }

  /**
   * The decoded assistant message of the last turn, in OpenAI's convention (assistant_message.ts): its
   * reasoning as `reasoning_content`, its well-formed calls in `tool_calls` and not in `content`.
   */
  addAssistantMessage(text: string, toolCalls?: ToolCall[]): void {
    this.#messages.push(turnMessage(text, toolCalls));
  }

  /** Tokens the environment appended after turn `turn`, and the messages they render. */
  addEnvironment(turn: number, tokens: readonly number[], messages: readonly EnvMessage[]): void {
    this.#push(tokens, 0, null, turn);
    this.#messages.push(...messages.map((m): ChatMessage => ({ ...m })));
  }

  finish(finishReason: string, toolCalls: ToolCallRecord[], status = "ok"): EpisodeResult {
    return {
      promptMessages: this.#promptMessages,
      messages: this.#messages,
      tokens: this.#tokens,
      promptLen: this.#promptLen,
      sampled: this.#sampled,
      logprobs: this.#logprobs,
      turnIdx: this.#turnIdx,
      toolCalls,
      numTurns: this.#turns,
      finishReason,
      status,
    };
  }

  #push(tokens: readonly number[], sampled: 0 | 1, logprobs: readonly number[] | null, turn: number): void {
    tokens.forEach((t, i) => {
      this.#tokens.push(t);
      this.#sampled.push(sampled);
      this.#logprobs.push(logprobs ? logprobs[i] : 0);
      this.#turnIdx.push(turn);
    });
  }
}
