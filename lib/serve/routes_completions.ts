/**
 * `POST /v1/completions` of `deno task serve`: vLLM's subset for token-in-token-out clients. The prompt
 * is token ids or text; each request is one `openSequence` on the engine, so concurrent requests share
 * its continuous batching, and token t is drawn from (seed, t) as in `LocalPolicy`.
 *
 * Supported: `max_tokens`, `temperature` (0 = greedy), `top_p`, `top_k`, `seed`, `stop_token_ids`,
 * `ignore_eos`, `skip_special_tokens`, `logprobs` (the sampled token's; `top_logprobs` lists only it),
 * `prompt_logprobs` (the prompt token's own entry at each position, keyed by id), `return_token_ids`,
 * `return_tokens_as_token_ids`, `model` (the base model or a loaded adapter). Neutral values of
 * `min_p`, penalties and `n` are accepted; others get 400, as does `stream: true`.
 *
 * @module
 */

import type { Generation } from "../engine/policy.ts";
import { checkTokenIds, HttpError } from "./limits.ts";
import { adapterOf, numberField, samplingFields, type ServeContext, stopTokenIds } from "./serve_context.ts";

type Json = Record<string, unknown>;

/** A parsed completions request. */
interface CompletionRequest {
  prompt: number[];
  maxTokens: number;
  sampling: ReturnType<typeof samplingFields>;
  stops: number[];
  logprobs: number | null;
  promptLogprobs: number | null;
  returnTokenIds: boolean;
  asIds: boolean;
  skipSpecial: boolean;
  adapter: string | null;
}

export async function completions(ctx: ServeContext, body: Json, signal?: AbortSignal): Promise<Response> {
  const req = parseRequest(ctx, body);
  const { turn, scored } = await ctx.gate.run(req.adapter, () => runTurn(ctx, req, signal));
  const name = req.adapter ?? ctx.baseName;
  const lastStop = turn.finishReason === "stop" ? turn.tokens[turn.tokens.length - 1] : null;
  const choice: Json = {
    index: 0,
    text: decode(ctx, turn.tokens, req.skipSpecial),
    logprobs: req.logprobs === null ? null : sampledLogprobs(ctx, turn, req.asIds),
    finish_reason: turn.finishReason,
    stop_reason: lastStop !== null && req.stops.includes(lastStop) ? lastStop : null,
    prompt_logprobs: scored ? promptLogprobs(ctx, req.prompt, scored, req.asIds) : null,
  };
  if (req.returnTokenIds) Object.assign(choice, { token_ids: turn.tokens, prompt_token_ids: req.prompt });
  return Response.json({
    id: `cmpl-${crypto.randomUUID()}`,
    object: "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: name,
    choices: [choice],
    usage: {
      prompt_tokens: req.prompt.length,
      completion_tokens: turn.tokens.length,
      total_tokens: req.prompt.length + turn.tokens.length,
    },
  });
}

function parseRequest(ctx: ServeContext, body: Json): CompletionRequest {
  const vocab = ctx.policy.config.vocab_size;
  const adapter = adapterOf(ctx, body.model);
  const prompt = promptIds(ctx, body.prompt, vocab);
  const maxTokens = numberField(body, "max_tokens", 16, 0, Number.MAX_SAFE_INTEGER, true);
  if (prompt.length + maxTokens > ctx.maxModelLen) {
    throw new HttpError(
      400,
      `This model's maximum context length is ${ctx.maxModelLen} tokens. However, you requested ${
        prompt.length + maxTokens
      } tokens (${prompt.length} in the prompt, ${maxTokens} for the completion).`,
    );
  }
  const stops = stopTokenIds(body, vocab);
  if (body.ignore_eos !== true && ctx.tokenizer) stops.push(ctx.tokenizer.eosTokenId);
  const optionalCount = (key: string) =>
    body[key] === undefined || body[key] === null ? null : numberField(body, key, 0, 0, 20, true);
  return {
    prompt,
    maxTokens,
    sampling: samplingFields(body),
    stops,
    logprobs: optionalCount("logprobs"),
    promptLogprobs: optionalCount("prompt_logprobs"),
    returnTokenIds: body.return_token_ids === true,
    asIds: body.return_tokens_as_token_ids === true,
    skipSpecial: body.skip_special_tokens !== false,
    adapter,
  };
}

/** The prompt as token ids: given as ids (a list, or a list holding one list), or text to encode. */
function promptIds(ctx: ServeContext, prompt: unknown, vocab: number): number[] {
  if (typeof prompt === "string") {
    if (!ctx.tokenizer) {
      throw new HttpError(400, "this model directory has no tokenizer; send the prompt as token ids");
    }
    return checkTokenIds(ctx.tokenizer.encode(prompt), vocab, "prompt");
  }
  if (
    Array.isArray(prompt) && prompt.length === 1 &&
    (Array.isArray(prompt[0]) || typeof prompt[0] === "string")
  ) {
    return promptIds(ctx, prompt[0], vocab);
  }
  return checkTokenIds(prompt, vocab, "prompt");
}

/**
 * One turn on a fresh sequence, plus the prompt's log-probs when asked for. `signal` (the client hung
 * up) cancels the turn within a decode step and frees the slot.
 */
async function runTurn(ctx: ServeContext, req: CompletionRequest, signal?: AbortSignal) {
  const { temperature, topK, topP, seed } = req.sampling;
  const seq = await ctx.policy.openSequence(req.prompt, { seed, capacity: ctx.maxModelLen, signal });
  let turn: Generation;
  try {
    turn = await seq.generate({
      maxNewTokens: req.maxTokens,
      temperature,
      topK,
      topP,
      stopTokens: req.stops,
    });
  } finally {
    await seq.close();
  }
  const scored = req.promptLogprobs === null
    ? null
    : (await ctx.policy.logprobs([req.prompt], { temperature: temperature > 0 ? temperature : 1 }))[0];
  return { turn, scored };
}

function tokenText(ctx: ServeContext, id: number, asIds: boolean): string {
  return asIds || !ctx.tokenizer ? `token_id:${id}` : ctx.tokenizer.decode([id]);
}

function decode(ctx: ServeContext, tokens: number[], skipSpecial: boolean): string {
  return ctx.tokenizer ? ctx.tokenizer.decode(tokens, { skipSpecialTokens: skipSpecial }) : "";
}

/** OpenAI completions logprobs: the sampled token's log-prob at each position. */
function sampledLogprobs(ctx: ServeContext, turn: Generation, asIds: boolean): Json {
  const tokens = turn.tokens.map((id) => tokenText(ctx, id, asIds));
  let offset = 0;
  const textOffset = tokens.map((t) => (offset += t.length) - t.length);
  return {
    text_offset: textOffset,
    token_logprobs: turn.logprobs.map(clampForJson),
    tokens,
    top_logprobs: tokens.map((t, i) => ({ [t]: clampForJson(turn.logprobs[i]) })),
  };
}

/** vLLM's prompt_logprobs: null, then per position a map from token id to its entry. */
function promptLogprobs(ctx: ServeContext, prompt: number[], scored: Float32Array, asIds: boolean) {
  return prompt.map((id, t) =>
    t === 0
      ? null
      : { [String(id)]: { logprob: clampForJson(scored[t]), decoded_token: tokenText(ctx, id, asIds) } }
  );
}

/** JSON has no -Infinity: vLLM writes -9999 for it, and so do we. */
function clampForJson(value: number): number {
  return Number.isFinite(value) ? value : -9999;
}
