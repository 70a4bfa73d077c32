/**
 * `POST /v1/chat/completions` of `deno task serve`: the conversation rendered by the model's own chat
 * template (chat_render.ts), `n` choices sampled until the end-of-turn token, and each reply read as vLLM
 * reads a Qwen3 reply with `--reasoning-parser qwen3 --tool-call-parser hermes` (chat_reply.ts): the
 * reasoning in `reasoning`, Hermes calls as OpenAI `tool_calls`. Streaming sends the same message in
 * deltas (chat_stream.ts). `tool_choice` `required` or a named tool forces the start of a call and guides
 * its body to a well-formed call of that tool (lib/engine/tool_call_guide.ts); a forced reply that still
 * holds no valid call (cut by `max_tokens`, or a tool whose arguments the guide leaves free) is an error,
 * never a 200 without the call asked for.
 *
 * @module
 */

import { assistantMessage } from "./chat_reply.ts";
import { type ChatSetup, messagesOf, renderChat } from "./chat_render.ts";
import { checkRecordable, episodeKeyOf, turnCap, withSampling } from "./gateway/routes.ts";
import type { EpisodeKey } from "./gateway/recorder.ts";
import { ChatDeltas } from "./chat_stream.ts";
import { HttpError } from "./limits.ts";
import { chatLogprobContent, type Position, promptLogprobs, sampledPositions } from "./logprobs.ts";
import { checkParameters } from "./params.ts";
import { toolCallGuide } from "../rollout/guided_calls.ts";
import { flag, MAX_LOGPROBS, type SamplingPlan, samplingPlan } from "./request.ts";
import { type ChoiceDelta, type ChoiceResult, choiceSpec, sampleChoice } from "./sample_choice.ts";
import { scorePrompt } from "./score_prompt.ts";
import { adapterOf, numberField, type ServeContext } from "./serve_context.ts";
import { sseResponse } from "./sse.ts";

type Json = Record<string, unknown>;

interface ChatRequest {
  setup: ChatSetup;
  plan: SamplingPlan;
  maxTokens: number;
  /** Alternatives per token (null: no log-probs). */
  topLogprobs: number | null;
  adapter: string | null;
}

export async function chatCompletions(
  ctx: ServeContext,
  body: Json,
  signal: AbortSignal,
  headers?: Headers,
): Promise<Response> {
  checkParameters(body, "chat");
  const key = ctx.recorder ? episodeKeyOf(headers, body) : null;
  if (key) {
    checkRecordable(body);
    body = withSampling(body, ctx.recorder!.sampling);
  }
  const req = key ? recordedRequest(ctx, body, key) : parseRequest(ctx, body);
  const head = {
    id: `chatcmpl-${crypto.randomUUID()}`,
    created: Math.floor(Date.now() / 1000),
    model: req.adapter ?? ctx.baseName,
  };
  if (key) return await recordedChat(ctx, req, body, key, head, signal);
  ctx.metrics.promptTokens += req.setup.prompt.length * req.plan.n;
  if (req.plan.stream) return sseResponse(signal, (send, s) => streamChat(ctx, req, head, send, s));
  const { scored, choices } = await ctx.gate.run(req.adapter, () => runChoices(ctx, req, signal));
  return Response.json({
    ...head,
    object: "chat.completion",
    choices: choices.map((c, index) => {
      const { message, finish } = reply(req, c);
      return {
        index,
        message,
        logprobs: logprobsOf(ctx, req, c),
        finish_reason: finish,
        stop_reason: c.stopReason,
      };
    }),
    usage: usage(req, choices),
    prompt_logprobs: scored && promptLogprobs(ctx, scored, req.plan.asIds),
  });
}

function parseRequest(ctx: ServeContext, body: Json): ChatRequest {
  const tokenizer = ctx.tokenizer;
  if (!tokenizer) {
    throw new HttpError(400, "this model directory has no tokenizer or chat template; use /v1/completions");
  }
  const adapter = adapterOf(ctx, body.model);
  const setup = renderChat(tokenizer, body);
  const plan = samplingPlan(body, ctx.policy.config.vocab_size, tokenizer);
  if (setup.forcedCall) {
    // vLLM guides a forced call's JSON; this engine's guide does, from the body the prompt opened.
    const guide = toolCallGuide(tokenizer, setup.forcedCall.tools, ctx.policy.config.vocab_size);
    plan.constraints.toolCalls = { ...guide, opened: setup.forcedCall.body };
  }
  const room = ctx.maxModelLen - setup.prompt.length;
  if (room < 1) {
    throw new HttpError(
      400,
      `This model's maximum context length is ${ctx.maxModelLen} tokens; the messages take ${setup.prompt.length}.`,
      undefined,
      "messages",
    );
  }
  // max_completion_tokens (OpenAI's name) wins over max_tokens; either must fit the room left.
  const key = body.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
  const asked = numberField(body, key, room, 1, room, true);
  const logprobs = flag(body, "logprobs", false);
  if (!logprobs && body.top_logprobs != null) {
    throw new HttpError(400, "top_logprobs needs logprobs: true", undefined, "top_logprobs");
  }
  const top = numberField(body, "top_logprobs", 0, 0, MAX_LOGPROBS, true);
  return { setup, plan, maxTokens: asked, topLogprobs: logprobs ? top : null, adapter };
}

/** `parseRequest` for a turn of episode `key`: messages past the context leave the episode full. */
function recordedRequest(ctx: ServeContext, body: Json, key: EpisodeKey): ChatRequest {
  try {
    return parseRequest(ctx, body);
  } catch (error) {
    if (error instanceof HttpError && error.param === "messages" && ctx.recorder!.markFull(key.episodeId)) {
      throw new HttpError(
        400,
        `${error.message} Episode ${key.episodeId} is full; end it (it is recorded as truncated).`,
        undefined,
        "messages",
      );
    }
    throw error;
  }
}

/**
 * One recorded turn of episode `key` (lib/serve/gateway/): sampled from the recorded tokens plus the
 * client's new messages (or from its own render once its history no longer matches), until the
 * end-of-turn token, as the rollout stage samples a turn.
 */
async function recordedChat(
  ctx: ServeContext,
  req: ChatRequest,
  body: Json,
  key: EpisodeKey,
  head: Json,
  signal: AbortSignal,
): Promise<Response> {
  const recorder = ctx.recorder!;
  const tokenizer = ctx.tokenizer!;
  const messages = messagesOf(body.messages);
  const { c, turn, adapter } = await ctx.gate.run(req.adapter, async () => {
    const turn = recorder.plan(key, messages, req.setup.prompt, {
      seed: req.plan.seed,
      thinking: req.setup.thinking,
    });
    const room = ctx.maxModelLen - turn.prompt.length;
    if (room < 1) throw new HttpError(400, `episode ${key.episodeId} fills max_model_len ${ctx.maxModelLen}`);
    const spec = choiceSpec(req.plan, 0, {
      prompt: turn.prompt,
      maxTokens: Math.min(req.maxTokens, room, turnCap(body, recorder.sampling)),
      ends: [tokenizer.eosTokenId],
      topLogprobs: req.topLogprobs ?? 0,
      decode: (t) => tokenizer.decode(t, { skipSpecialTokens: req.plan.skipSpecial }),
    });
    return { c: await sampleChoice(ctx, spec, signal), turn, adapter: await ctx.policy.adapterId() };
  });
  ctx.metrics.promptTokens += turn.prompt.length;
  ctx.metrics.choice(c.finishReason, c.tokens.length);
  const { message, finish } = reply(req, c);
  const stopped = c.tokens.at(-1) === tokenizer.eosTokenId;
  if (turn.recorded) recorder.addTurn(key, c.tokens, c.logprobs, stopped, message, adapter);
  const prompt = turn.prompt.length;
  return Response.json({
    ...head,
    object: "chat.completion",
    choices: [{
      index: 0,
      message,
      logprobs: logprobsOf(ctx, req, c),
      finish_reason: finish,
      stop_reason: null,
    }],
    usage: {
      prompt_tokens: prompt,
      completion_tokens: c.tokens.length,
      total_tokens: prompt + c.tokens.length,
    },
    episode: { id: key.episodeId, recorded: turn.recorded },
  });
}

/** The prompt's log-probs (when asked) and every choice. */
async function runChoices(
  ctx: ServeContext,
  req: ChatRequest,
  signal: AbortSignal,
  onDelta?: (i: number, d: ChoiceDelta) => void,
): Promise<{ scored: Position[] | null; choices: ChoiceResult[] }> {
  const { plan, setup } = req;
  const scored = plan.promptLogprobs === null
    ? null
    : await scorePrompt(ctx, setup.prompt, plan.temperature, plan.promptLogprobs);
  const special = ctx.tokenizer!.special;
  const ends = plan.ignoreEos ? [] : [special.imEnd, special.endOfText];
  const choices = await Promise.all(Array.from({ length: plan.n }, (_, i) =>
    sampleChoice(
      ctx,
      choiceSpec(plan, i, {
        prompt: setup.prompt,
        maxTokens: req.maxTokens,
        ends,
        topLogprobs: req.topLogprobs ?? 0,
        decode: (t) => ctx.tokenizer!.decode(t, { skipSpecialTokens: plan.skipSpecial }),
        onDelta: onDelta && ((d) => onDelta(i, d)),
      }),
      signal,
    )));
  choices.forEach((c) => ctx.metrics.choice(c.finishReason, c.tokens.length));
  return { scored, choices };
}

/** A choice's message and finish reason; a forced call that did not parse is an error. */
function reply(req: ChatRequest, c: ChoiceResult): { message: Json; finish: string } {
  const { setup } = req;
  const { message, called } = assistantMessage(setup.forced + c.text, setup);
  if (setup.mustCall !== null && !called) {
    throw new HttpError(
      400,
      `tool_choice ${setup.mustCall}: the model's reply, forced to start a call, holds no valid call ` +
        `(finish_reason ${c.finishReason}: ${
          JSON.stringify(c.text.slice(0, 200))
        }); raise max_tokens or use tool_choice auto`,
      "BadRequestError",
      "tool_choice",
    );
  }
  if (setup.firstCallOnly) message.tool_calls = (message.tool_calls as Json[]).slice(0, 1);
  const named = setup.mustCall !== null && setup.mustCall !== "required";
  return { message, finish: called && !named ? "tool_calls" : c.finishReason };
}

function logprobsOf(
  ctx: ServeContext,
  req: ChatRequest,
  c: { tokens: number[]; logprobs: number[]; top?: ChoiceResult["top"] },
) {
  if (req.topLogprobs === null) return null;
  return {
    content: chatLogprobContent(
      ctx,
      sampledPositions(c.tokens, c.logprobs, c.top),
      req.topLogprobs,
      req.plan.asIds,
    ),
  };
}

function usage(req: ChatRequest, choices: ChoiceResult[]): Json {
  const prompt = req.setup.prompt.length;
  const completion = choices.reduce((a, c) => a + c.tokens.length, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The streamed answer: each choice's role, its deltas, its last delta with the finish; usage last. */
async function streamChat(
  ctx: ServeContext,
  req: ChatRequest,
  head: Json,
  send: (chunk: Json) => void,
  signal: AbortSignal,
): Promise<void> {
  const chunk = (index: number, delta: Json, extra: Json = {}) =>
    send({
      ...head,
      object: "chat.completion.chunk",
      choices: [{ index, delta, logprobs: null, finish_reason: null, ...extra }],
    });
  const deltas = Array.from({ length: req.plan.n }, (_, i) => {
    chunk(i, { role: "assistant", content: "" });
    const d = new ChatDeltas(req.setup);
    d.push(req.setup.forced);
    return d;
  });
  const { choices } = await ctx.gate.run(req.adapter, () =>
    runChoices(ctx, req, signal, (i, piece) => {
      const delta = deltas[i].push(piece.text);
      const logprobs = logprobsOf(ctx, req, piece);
      if (delta || (logprobs && piece.tokens.length > 0)) chunk(i, delta ?? {}, { logprobs });
    }));
  choices.forEach((c, i) => {
    const { message, finish } = reply(req, c);
    chunk(i, deltas[i].finish(message) ?? {}, { finish_reason: finish, stop_reason: c.stopReason });
  });
  if (req.plan.includeUsage) {
    send({ ...head, object: "chat.completion.chunk", choices: [], usage: usage(req, choices) });
  }
}
