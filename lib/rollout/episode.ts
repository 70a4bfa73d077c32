/**
 * One episode, token in, token out (docs/rollouts.md):
 *
 * 1. the prompt is rendered once by the model's chat template (`tools`, `enable_thinking`);
 * 2. each assistant turn is sampled until `<|im_end|>` or `max_new_tokens`, its tokens and log-probs
 *    kept exactly as sampled (text is decoded only for the environment and for `messages`);
 * 3. what the environment answers is appended as the template's own pieces: tool results as a **user**
 *    turn of `<tool_response>` blocks, or a user message, each followed by the next assistant header;
 * 4. earlier `<think>` blocks stay in the sequence (Qwen3's template would drop them when re-rendering:
 *    we never re-render, so the tokens are the true trajectory).
 *
 * The episode ends when the environment says so, at `max_turns`, or when the next turn would not fit
 * `max_total_tokens` (`truncated`). A first prompt that leaves no room for one sampled token stops the
 * stage instead (an episode of no sampled token would be scored, masked and trained on as if it were
 * one). Episodes are independent async tasks: each asks the policy for its
 * own turns (`openSequence`), and the policy batches whatever turns are pending.
 *
 * @module
 */

import type { ChatMessage, ChatTokenizer, ToolSpec } from "../model/chat.ts";
import { UserError } from "../errors.ts";
import type { Policy } from "../engine/policy.ts";
import type { ToolCallGuide } from "../engine/tool_call_guide.ts";
import type { ToolCallRecord } from "./dispatch.ts";
import { episodeStatus } from "./dispatch.ts";
import type { Environment, EnvMessage } from "./environment.ts";
import { type EpisodeResult, Trajectory } from "./trajectory.ts";

/** How episodes are sampled (from `rollout.generation` and `rollout.environment`). */
export interface EpisodeOptions {
  maxNewTokens: number;
  maxTotalTokens: number;
  maxTurns: number;
  temperature: number;
  topK: number;
  topP: number;
  enableThinking: boolean;
  /** Offered to the model in the prompt (empty: none). */
  toolSpecs: ToolSpec[];
  /** Guided tool calls: each call's tokens keep it well formed (`rollout.generation.guided_tool_calls`). */
  toolCallGuide?: ToolCallGuide;
  /**
   * Rendered prompts by their messages, shared by a rollout's episodes: a group's episodes have the same
   * prompt, and rendering the chat template is the costliest JS work of a short episode.
   */
  promptCache?: Map<string, number[]>;
}

/** The one-line refusal of a prompt that leaves no room to sample, with the numbers. */
function promptTooLong(promptTokens: number, o: EpisodeOptions): UserError {
  const tools = o.toolSpecs.length ? ` (with ${o.toolSpecs.length} tool specs)` : "";
  return new UserError("rollout.generation.max_total_tokens", {
    value: o.maxTotalTokens,
    why:
      `a task's prompt${tools} is ${promptTokens} tokens, so no token could be sampled; nothing was written`,
    fix: `raise rollout.generation.max_total_tokens to at least ${promptTokens + o.maxNewTokens} ` +
      "(the prompt plus max_new_tokens), or shorten the prompt (fewer tools, a shorter system prompt)",
  });
}

/** Runs one episode of `env` on `policy`, sampling with `seed`; closes `env` when it ends. */
export async function runEpisode(
  policy: Policy,
  tokenizer: ChatTokenizer,
  env: Environment,
  seed: number,
  o: EpisodeOptions,
): Promise<EpisodeResult> {
  try {
    return await sample(policy, tokenizer, env, seed, o);
  } finally {
    await env.close?.();
  }
}

async function sample(
  policy: Policy,
  tokenizer: ChatTokenizer,
  env: Environment,
  seed: number,
  o: EpisodeOptions,
): Promise<EpisodeResult> {
  const promptMessages = await env.reset();
  const prompt = renderPrompt(tokenizer, promptMessages, o);
  const trajectory = new Trajectory(prompt, promptMessages);
  if (prompt.length + 1 >= o.maxTotalTokens) throw promptTooLong(prompt.length, o);
  const sequence = await policy.openSequence(prompt, { seed, capacity: o.maxTotalTokens });
  const toolCalls: ToolCallRecord[] = [];
  try {
    for (let turn = 1;; turn++) {
      const room = o.maxTotalTokens - trajectory.length;
      const g = await sequence.generate({
        maxNewTokens: Math.min(o.maxNewTokens, room),
        temperature: o.temperature,
        topK: o.topK,
        topP: o.topP,
        stopTokens: [tokenizer.eosTokenId],
        ...(o.toolCallGuide ? { constraints: { toolCalls: o.toolCallGuide } } : {}),
      });
      const stopped = g.finishReason === "stop";
      const body = stopped ? g.tokens.slice(0, -1) : g.tokens;
      const text = tokenizer.decode(body);
      trajectory.addTurn(turn, g.tokens, g.logprobs);
      if (!stopped && room <= o.maxNewTokens) return finish(trajectory, "truncated", toolCalls, text);
      const step = await env.step({ turn, text, finishReason: stopped ? "stop" : "length" });
      toolCalls.push(...(step.toolCalls ?? []));
      trajectory.addAssistantMessage(text, step.assistantToolCalls);
      if (step.done) return finish(trajectory, step.reason ?? "env_done", toolCalls);
      if (turn >= o.maxTurns) return finish(trajectory, "max_turns", toolCalls);
      const messages = step.messages.map((m) => ({ ...m, content: tokenizer.neutralizeSpecial(m.content) }));
      // A turn cut at max_new_tokens that the environment continues is closed by an appended end-of-turn.
      const appended = renderAnswer(tokenizer, messages, o.enableThinking, !stopped);
      // The next turn needs room for at least one sampled token.
      if (trajectory.length + appended.length + 1 > o.maxTotalTokens) {
        return finish(trajectory, "truncated", toolCalls);
      }
      await sequence.append(appended);
      trajectory.addEnvironment(turn, appended, messages);
    }
  } finally {
    await sequence.close();
  }
}

function renderPrompt(tokenizer: ChatTokenizer, messages: ChatMessage[], o: EpisodeOptions): number[] {
  const key = JSON.stringify(messages);
  let tokens = o.promptCache?.get(key);
  if (!tokens) {
    tokens = tokenizer.renderChatTokens(messages, {
      tools: o.toolSpecs,
      enableThinking: o.enableThinking,
      addGenerationPrompt: true,
    });
    o.promptCache?.set(key, tokens);
  }
  return tokens;
}

function finish(t: Trajectory, reason: string, calls: ToolCallRecord[], lastText?: string): EpisodeResult {
  if (lastText !== undefined) t.addAssistantMessage(lastText);
  return t.finish(reason, calls, episodeStatus(calls, reason));
}

/**
 * The tokens the template renders for the environment's answer, through the next assistant header:
 * all tool results of a turn as one user turn of `<tool_response>` blocks, or one user message.
 */
export function renderAnswer(
  tokenizer: ChatTokenizer,
  messages: readonly EnvMessage[],
  enableThinking: boolean,
  closeTurn = false,
): number[] {
  const pieces = { includeTurnEnd: closeTurn, enableThinking };
  const tools = messages.filter((m): m is EnvMessage & { role: "tool" } => m.role === "tool");
  if (tools.length === messages.length && tools.length > 0) {
    return tokenizer.toolResultTokens(tools.map((m) => m.content), pieces);
  }
  if (messages.length === 1 && messages[0].role === "user") {
    return tokenizer.userTurnTokens(messages[0].content, pieces);
  }
  throw new Error(
    `environment answered with ${messages.map((m) => m.role).join(", ") || "no messages"}: ` +
      "answer a turn with its tool results or with one user message (or done: true)",
  );
}
