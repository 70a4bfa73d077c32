/**
 * `POST /v1/chat/completions` of `deno task serve`: the conversation rendered by the model's own chat
 * template (with `tools`, and `chat_template_kwargs.enable_thinking`), one turn sampled until the
 * end-of-turn token, and Hermes tool calls (`<tool_call>{...}</tool_call>` after the reasoning)
 * returned as OpenAI `tool_calls`, so an adapter can be tried from any OpenAI client. The reasoning
 * (`<think>…</think>`) comes back as `reasoning_content`, as vLLM's reasoning parser returns it.
 *
 * @module
 */

import type { ChatMessage, ChatTokenizer, ToolSpec } from "../model/chat.ts";
import { assistantMessage } from "./chat_reply.ts";
import { HttpError } from "./limits.ts";
import { adapterOf, numberField, samplingFields, type ServeContext, stopTokenIds } from "./serve_context.ts";

type Json = Record<string, unknown>;

const ROLES = new Set(["system", "user", "assistant", "tool"]);

export async function chatCompletions(
  ctx: ServeContext,
  body: Json,
  signal?: AbortSignal,
): Promise<Response> {
  const tokenizer = ctx.tokenizer;
  if (!tokenizer) {
    throw new HttpError(400, "this model directory has no tokenizer or chat template; use /v1/completions");
  }
  const adapter = adapterOf(ctx, body.model);
  const prompt = render(tokenizer, body);
  const room = ctx.maxModelLen - prompt.length;
  if (room < 1) {
    throw new HttpError(
      400,
      `This model's maximum context length is ${ctx.maxModelLen} tokens; the messages take ${prompt.length}.`,
    );
  }
  const maxTokens = numberField(
    body,
    "max_completion_tokens",
    numberField(body, "max_tokens", room, 1, room, true),
    1,
    room,
    true,
  );
  const { temperature, topK, topP, seed } = samplingFields(body);
  const stops = [
    tokenizer.special.imEnd,
    tokenizer.special.endOfText,
    ...stopTokenIds(body, ctx.policy.config.vocab_size),
  ];
  const turn = await ctx.gate.run(adapter, async () => {
    const seq = await ctx.policy.openSequence(prompt, { seed, capacity: ctx.maxModelLen, signal });
    try {
      return await seq.generate({ maxNewTokens: maxTokens, temperature, topK, topP, stopTokens: stops });
    } finally {
      await seq.close();
    }
  });
  const sampled = turn.finishReason === "stop" ? turn.tokens.slice(0, -1) : turn.tokens;
  const kwargs = (body.chat_template_kwargs ?? {}) as Json;
  const tools = Array.isArray(body.tools) && body.tools.length > 0;
  const { message, called } = assistantMessage(tokenizer.decode(sampled), {
    parseTools: tools && (body.tool_choice === undefined || body.tool_choice === "auto"),
    thinking: kwargs.enable_thinking !== false,
  });
  const logprobs = body.logprobs === true
    ? {
      content: turn.tokens.map((id, i) => ({
        token: `token_id:${id}`,
        logprob: Number.isFinite(turn.logprobs[i]) ? turn.logprobs[i] : -9999,
      })),
    }
    : null;
  return Response.json({
    id: `chatcmpl-${crypto.randomUUID()}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: adapter ?? ctx.baseName,
    choices: [{
      index: 0,
      message,
      logprobs,
      finish_reason: called ? "tool_calls" : turn.finishReason,
    }],
    usage: {
      prompt_tokens: prompt.length,
      completion_tokens: turn.tokens.length,
      total_tokens: prompt.length + turn.tokens.length,
    },
  });
}

/** The messages (and tools) rendered by the chat template, with the generation prompt. */
function render(tokenizer: ChatTokenizer, body: Json): number[] {
  const messages = body.messages;
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new HttpError(400, "messages must be a non-empty list");
  }
  const checked: ChatMessage[] = messages.map((m, i) => {
    if (!m || typeof m !== "object" || !ROLES.has((m as Json).role as string)) {
      throw new HttpError(400, `messages[${i}].role must be one of system, user, assistant, tool`);
    }
    const msg = m as Json;
    if (msg.content !== null && msg.content !== undefined && typeof msg.content !== "string") {
      throw new HttpError(400, `messages[${i}].content must be a string (content parts are not supported)`);
    }
    return { ...msg, content: (msg.content as string | null) ?? "" } as ChatMessage;
  });
  const tools = body.tools;
  if (tools !== undefined && tools !== null && !Array.isArray(tools)) {
    throw new HttpError(400, "tools must be a list");
  }
  const kwargs = (body.chat_template_kwargs ?? {}) as Json;
  try {
    return tokenizer.renderChatTokens(checked, {
      tools: (tools ?? undefined) as ToolSpec[] | undefined,
      addGenerationPrompt: true,
      enableThinking: typeof kwargs.enable_thinking === "boolean" ? kwargs.enable_thinking : undefined,
    });
  } catch (e) {
    throw new HttpError(400, `the chat template could not render the messages: ${(e as Error).message}`);
  }
}
