/**
 * The tool environment (the default): parses an assistant turn's `<tool_call>` blocks, runs them
 * (dispatch.ts: schema checks, timeouts, budgets, bounded concurrency) and answers with one `tool`
 * message per call, in order. A bad call runs nothing and its message tells the model what was wrong.
 *
 * A turn without tool calls is the final answer: the episode ends (`stop`) when `stopOnFinalAnswer`,
 * otherwise the next user message is `continuePrompt`. A turn cut at max_new_tokens ends the episode
 * (`length`) and runs nothing: its calls are unfinished. When the episode's tool-call budget is used up
 * the episode ends (`tool_budget`) after the turn that used it.
 *
 * Each episode has a scope (lib/tools/episode_scope.ts) for what its tools keep, such as an MCP server
 * started per episode: `reset` lets every tool start its part, and `close` (when the episode ends) gives
 * it all back.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { ToolCall } from "../model/chat.ts";
import { EpisodeScope } from "../tools/episode_scope.ts";
import type { Tool } from "../tools/types.ts";
import { callsUsed, runToolCalls } from "./dispatch.ts";
import type { AssistantTurn, Environment, EnvStep } from "./environment.ts";
import { promptMessages } from "./environment.ts";
import type { Limiter } from "./limiter.ts";
import { type ParsedToolCall, parseToolCalls } from "./tool_calls.ts";

/** Settings of the tool environment (from `rollout.tools` and `rollout.environment`). */
export interface ToolEnvOptions {
  tools: ReadonlyMap<string, Tool>;
  limiter: Limiter;
  systemPrompt: string | null;
  maxCallsPerTurn: number;
  maxCallsPerEpisode: number;
  timeoutMs: number;
  maxOutputChars: number;
  stopOnFinalAnswer: boolean;
  continuePrompt: string;
}

export class ToolEnvironment implements Environment {
  readonly #task: Task;
  readonly #options: ToolEnvOptions;
  readonly #scope = new EpisodeScope();
  #callsLeft: number;

  constructor(task: Task, options: ToolEnvOptions) {
    this.#task = task;
    this.#options = options;
    this.#callsLeft = options.maxCallsPerEpisode;
  }

  reset() {
    for (const tool of this.#options.tools.values()) tool.startEpisode?.(this.#scope);
    return promptMessages(this.#task, this.#options.systemPrompt);
  }

  /** Gives back what the episode's tools kept (per-episode MCP servers). */
  close(): Promise<void> {
    return this.#scope.close();
  }

  async step(turn: AssistantTurn): Promise<EnvStep> {
    if (turn.finishReason === "length") return { messages: [], done: true, reason: "length" };
    const calls = parseToolCalls(turn.text);
    if (calls.length === 0) return this.#finalAnswer();
    const o = this.#options;
    const records = await runToolCalls(calls, o.tools, {
      task: this.#task,
      turn: turn.turn,
      maxCallsPerTurn: o.maxCallsPerTurn,
      callsLeft: this.#callsLeft,
      timeoutMs: o.timeoutMs,
      maxOutputChars: o.maxOutputChars,
      limiter: o.limiter,
      episode: this.#scope,
    });
    this.#callsLeft -= callsUsed(records);
    const step: EnvStep = {
      messages: records.map((r) => ({ role: "tool" as const, name: r.name, content: r.output })),
      done: false,
      toolCalls: records,
      assistantToolCalls: wellFormed(calls),
    };
    return this.#callsLeft <= 0 ? { ...step, messages: [], done: true, reason: "tool_budget" } : step;
  }

  #finalAnswer(): EnvStep {
    if (this.#options.stopOnFinalAnswer) return { messages: [], done: true, reason: "stop" };
    return { messages: [{ role: "user", content: this.#options.continuePrompt }], done: false };
  }
}

/** The parsed calls as chat-message tool calls (for the `messages` column). */
function wellFormed(calls: readonly ParsedToolCall[]): ToolCall[] {
  return calls.flatMap((c) =>
    c.ok ? [{ type: "function" as const, function: { name: c.name, arguments: { ...c.arguments } } }] : []
  );
}
