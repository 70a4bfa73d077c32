/**
 * Environments: what answers an assistant turn. One small interface, three kinds (`rollout.environment.kind`):
 *
 * - `tools` (default): runs the turn's tool calls and feeds their results back; a turn without a tool
 *   call ends the episode (`stop_on_final_answer`) or gets `continue_prompt` as the next user message.
 * - `scripted` (seed 002's multi-step episodes, see docs/DESIGN.md): tool calls run as above; a turn
 *   without one gets the next user message of the task's script, and the task's stop phrase ends the
 *   episode early.
 * - `module`: your own, from a TypeScript module (`rollout.environment.module`).
 *
 * An environment returns chat messages, never tokens: the episode loop renders them with the chat
 * template's own pieces (docs/environments.md), so what is appended is exactly what the template renders.
 *
 * @module
 */

import type { ChatMessage, ToolCall } from "../model/chat.ts";
import type { Task } from "../data/task.ts";
import type { ToolCallRecord } from "./dispatch.ts";

/** One sampled assistant turn, as the environment sees it. */
export interface AssistantTurn {
  /** 1-based index of the turn in the episode. */
  turn: number;
  /** The decoded sampled text, without the final end-of-turn token (`<think>` and `<tool_call>` kept). */
  text: string;
  /** `stop`: the turn ended with its end-of-turn token; `length`: cut at max_new_tokens. */
  finishReason: "stop" | "length";
}

/** A message an environment appends: tool results (all of one turn) or one user message. */
export type EnvMessage =
  | { role: "tool"; name: string; content: string }
  | { role: "user"; content: string };

/** The environment's answer to a turn. */
export interface EnvStep {
  /** Messages to append before the next turn (empty when done). */
  messages: EnvMessage[];
  /** End the episode now. */
  done: boolean;
  /** `finish_reason` when done (e.g. `stop`, `env_done`, `tool_budget`). */
  reason?: string;
  /** Tool calls run for this turn (stored in `tool_calls`). */
  toolCalls?: ToolCallRecord[];
  /** The turn's well-formed calls, for the assistant message in `messages`. */
  assistantToolCalls?: ToolCall[];
}

/** One episode's environment. */
export interface Environment {
  /** The prompt messages (system prompt included) for the task. */
  reset(): Promise<ChatMessage[]> | ChatMessage[];
  /** Answers one assistant turn. */
  step(turn: AssistantTurn): Promise<EnvStep>;
  /**
   * Called once when the episode ends, however it ends (done, max turns, truncated, or a fault): gives
   * back what the episode held (MCP servers started per episode).
   */
  close?(): Promise<void>;
}

/** What a custom environment module gets besides the task. */
export interface EnvironmentContext {
  /** `data.system_prompt` (null: none). */
  systemPrompt: string | null;
  /** The built-in tool environment for this task, to delegate tool calls to. */
  tools: Environment;
  /** `rollout.environment.max_turns`. */
  maxTurns: number;
}

/** Makes one episode's environment; a custom module exports it as `createEnvironment` (or default). */
export type CustomEnvironmentFactory = (task: Task, context: EnvironmentContext) => Environment;

/** Makes the environment of one episode of a task (what the rollout driver calls). */
export type EnvironmentFactory = (task: Task) => Environment;

/** The usual prompt: the system prompt (if any) and the task's question as the user message. */
export function promptMessages(task: Task, systemPrompt: string | null): ChatMessage[] {
  const messages: ChatMessage[] = [];
  if (systemPrompt) messages.push({ role: "system", content: systemPrompt });
  messages.push({ role: "user", content: task.prompt });
  return messages;
}
