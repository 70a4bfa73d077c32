/**
 * `POST /v1/completions` of `deno task serve`, as vLLM answers it (docs/serving.md, "Parameters"): one
 * prompt or a batch (text, token ids, or lists of either), `n` choices each (choice p·n + i is choice i
 * of prompt p), stop strings and token ids, constraints, `echo` (the prompt's text, and its log-probs
 * with `logprobs`), `prompt_logprobs`, `logprobs: k` alternatives, streaming. Every choice is one
 * `openSequence` on the engine, so concurrent requests and choices share its continuous batching, and
 * token t of a choice is drawn from (seed, t) as in `LocalPolicy`.
 *
 * @module
 */

import { checkTokenIds, HttpError } from "./limits.ts";
import { checkParameters } from "./params.ts";
import { MAX_LOGPROBS, type SamplingPlan, samplingPlan } from "./request.ts";
import { type ChoiceDelta, type ChoiceResult, choiceSpec, sampleChoice } from "./sample_choice.ts";
import { adapterOf, numberField, type ServeContext } from "./serve_context.ts";
import { completionLogprobs, type Position, promptLogprobs, sampledPositions } from "./logprobs.ts";
import { scorePrompt } from "./score_prompt.ts";
import { sseResponse } from "./sse.ts";

type Json = Record<string, unknown>;

/** A parsed completions request. */
interface CompletionRequest {
  prompts: { ids: number[]; text: string | null }[];
  maxTokens: number;
  plan: SamplingPlan;
  /** Alternatives per sampled token (null: no log-probs). */
  logprobs: number | null;
  echo: boolean;
  adapter: string | null;
}

export async function completions(ctx: ServeContext, body: Json, signal: AbortSignal): Promise<Response> {
  checkParameters(body, "completions");
  const req = parseRequest(ctx, body);
  const head = {
    id: `cmpl-${crypto.randomUUID()}`,
    created: Math.floor(Date.now() / 1000),
    model: req.adapter ?? ctx.baseName,
  };
  ctx.metrics.promptTokens += req.prompts.reduce((a, p) => a + p.ids.length * req.plan.n, 0);
  if (req.plan.stream) return sseResponse(signal, (send, s) => streamCompletions(ctx, req, head, send, s));
  const prompts = await ctx.gate.run(
    req.adapter,
    () => Promise.all(req.prompts.map((_, p) => runPrompt(ctx, req, p, signal))),
  );
  const choices = prompts.flatMap((answer, p) =>
    answer.choices.map((c, i) => choiceJson(ctx, req, p, answer.scored, c, p * req.plan.n + i))
  );
  return Response.json({
    ...head,
    object: "text_completion",
    choices,
    usage: usage(req, prompts.flatMap((a) => a.choices)),
  });
}

function parseRequest(ctx: ServeContext, body: Json): CompletionRequest {
  const vocab = ctx.policy.config.vocab_size;
  const adapter = adapterOf(ctx, body.model);
  const prompts = promptsOf(ctx, body.prompt, vocab);
  const plan = samplingPlan(body, vocab, ctx.tokenizer);
  const maxTokens = plan.maxTokens ?? 16;
  const longest = Math.max(...prompts.map((p) => p.ids.length));
  if (longest + maxTokens > ctx.maxModelLen) {
    throw new HttpError(
      400,
      `This model's maximum context length is ${ctx.maxModelLen} tokens. However, you requested ${
        longest + maxTokens
      } tokens (${longest} in the prompt, ${maxTokens} for the completion).`,
      undefined,
      "max_tokens",
    );
  }
  const logprobs = body.logprobs == null ? null : numberField(body, "logprobs", 0, 0, MAX_LOGPROBS, true);
  return { prompts, maxTokens, plan, logprobs, echo: body.echo === true, adapter };
}

/** Prompts as token ids: one prompt (text or ids) or a batch (a list of texts or of id lists). */
function promptsOf(ctx: ServeContext, prompt: unknown, vocab: number): CompletionRequest["prompts"] {
  const one = (p: unknown, field: string) => {
    if (typeof p === "string") {
      if (!ctx.tokenizer) {
        throw new HttpError(
          400,
          "this model directory has no tokenizer; send the prompt as token ids",
          undefined,
          "prompt",
        );
      }
      return { ids: checkTokenIds(ctx.tokenizer.encode(p), vocab, field), text: p };
    }
    return { ids: checkTokenIds(p, vocab, field), text: null };
  };
  if (
    Array.isArray(prompt) && prompt.length > 0 &&
    prompt.every((p) => typeof p === "string" || Array.isArray(p))
  ) {
    return prompt.map((p, i) => one(p, `prompt[${i}]`));
  }
  return [one(prompt, "prompt")];
}

interface PromptAnswer {
  /** Prompt positions with log-probs (null when not asked). */
  scored: Position[] | null;
  choices: ChoiceResult[];
}

/** Scores prompt `p` when asked and samples its n choices (`onDelta` streams choice i's pieces). */
async function runPrompt(
  ctx: ServeContext,
  req: CompletionRequest,
  p: number,
  signal: AbortSignal,
  onDelta?: (i: number, delta: ChoiceDelta, scored: Position[] | null) => void,
): Promise<PromptAnswer> {
  const { ids } = req.prompts[p];
  const plan = req.plan;
  const k = Math.max(plan.promptLogprobs ?? 0, req.echo ? req.logprobs ?? 0 : 0);
  const scoring = plan.promptLogprobs !== null || (req.echo && req.logprobs !== null);
  const scored = scoring ? await scorePrompt(ctx, ids, plan.temperature, k) : null;
  const ends = plan.ignoreEos || !ctx.tokenizer ? [] : [ctx.tokenizer.eosTokenId];
  const choices = await Promise.all(Array.from({ length: plan.n }, (_, i) =>
    sampleChoice(
      ctx,
      choiceSpec(plan, i, {
        prompt: ids,
        maxTokens: req.maxTokens,
        ends,
        topLogprobs: req.logprobs ?? 0,
        decode: (t) => ctx.tokenizer?.decode(t, { skipSpecialTokens: plan.skipSpecial }) ?? "",
        onDelta: onDelta && ((d) => onDelta(i, d, scored)),
      }),
      signal,
    )));
  choices.forEach((c) => ctx.metrics.choice(c.finishReason, c.tokens.length));
  return { scored, choices };
}

function echoText(ctx: ServeContext, req: CompletionRequest, p: number): string {
  const { ids, text } = req.prompts[p];
  return text ?? ctx.tokenizer?.decode(ids, { skipSpecialTokens: req.plan.skipSpecial }) ?? "";
}

function choiceJson(
  ctx: ServeContext,
  req: CompletionRequest,
  p: number,
  scored: Position[] | null,
  c: ChoiceResult,
  index: number,
): Json {
  const { asIds, promptLogprobs: promptK } = req.plan;
  const sampled = sampledPositions(c.tokens, c.logprobs, c.top);
  const positions = req.echo && scored ? [...scored, ...sampled] : sampled;
  const out: Json = {
    index,
    text: (req.echo ? echoText(ctx, req, p) : "") + c.text,
    logprobs: req.logprobs === null ? null : completionLogprobs(ctx, positions, req.logprobs, asIds),
    finish_reason: c.finishReason,
    stop_reason: c.stopReason,
    prompt_logprobs: promptK !== null && scored ? promptLogprobs(ctx, withTop(scored, promptK), asIds) : null,
  };
  if (req.plan.returnTokenIds) {
    Object.assign(out, { token_ids: c.tokens, prompt_token_ids: req.prompts[p].ids });
  }
  return out;
}

/** Positions with at most `k` alternatives each. */
function withTop(positions: Position[], k: number): Position[] {
  return positions.map((p) => ({
    ...p,
    top: p.top && { ids: p.top.ids.slice(0, k), logprobs: p.top.logprobs.slice(0, k) },
  }));
}

function usage(req: CompletionRequest, choices: ChoiceResult[]): Json {
  const prompt = req.prompts.reduce((a, p) => a + p.ids.length, 0);
  const completion = choices.reduce((a, c) => a + c.tokens.length, 0);
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The streamed answer: per choice, the echo first, then its pieces, then its finish; usage last. */
async function streamCompletions(
  ctx: ServeContext,
  req: CompletionRequest,
  head: Json,
  send: (chunk: Json) => void,
  signal: AbortSignal,
): Promise<void> {
  const chunk = (choice: Json) =>
    send({ ...head, object: "text_completion", choices: [choice], usage: null });
  const offsets = new Map<number, number>(); // text offset reached by each choice's streamed log-probs
  const piece = (index: number, text: string, positions: Position[]) => {
    const at = offsets.get(index) ?? 0;
    const logprobs = req.logprobs === null
      ? null
      : completionLogprobs(ctx, positions, req.logprobs, req.plan.asIds, at);
    if (logprobs) offsets.set(index, at + (logprobs.tokens as string[]).reduce((a, t) => a + t.length, 0));
    chunk({ index, text, logprobs, finish_reason: null, stop_reason: null });
  };
  const echoed = new Set<number>();
  const echo = (p: number, index: number, scored: Position[] | null) => {
    if (!req.echo || echoed.has(index)) return;
    echoed.add(index);
    piece(index, echoText(ctx, req, p), scored ?? []);
  };
  const answers = await ctx.gate.run(
    req.adapter,
    () =>
      Promise.all(req.prompts.map((_, p) =>
        runPrompt(ctx, req, p, signal, (i, d, scored) => {
          const index = p * req.plan.n + i;
          echo(p, index, scored);
          piece(index, d.text, sampledPositions(d.tokens, d.logprobs, d.top));
        })
      )),
  );
  answers.forEach((answer, p) =>
    answer.choices.forEach((c, i) => {
      const index = p * req.plan.n + i;
      echo(p, index, answer.scored);
      chunk({ index, text: "", logprobs: null, finish_reason: c.finishReason, stop_reason: c.stopReason });
    })
  );
  if (req.plan.includeUsage) {
    send({
      ...head,
      object: "text_completion",
      choices: [],
      usage: usage(req, answers.flatMap((a) => a.choices)),
    });
  }
}
