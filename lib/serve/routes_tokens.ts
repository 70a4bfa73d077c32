/**
 * `POST /tokenize`, `POST /detokenize` and `GET /version` of `deno task serve`, in vLLM's shapes:
 * `/tokenize` takes a `prompt` (text) or chat `messages` (rendered by the chat template, with `tools`,
 * `add_generation_prompt`, `continue_final_message`, `chat_template_kwargs`) and answers
 * `{count, max_model_len, tokens, token_strs}` (`token_strs` with `return_token_strs: true`);
 * `/detokenize` takes `tokens` and answers `{prompt}`.
 *
 * @module
 */

import { TOOLKIT_VERSION } from "../arrow/metadata.ts";
import { renderChat } from "./chat_render.ts";
import { checkTokenIds, HttpError } from "./limits.ts";
import { checkParameters } from "./params.ts";
import { flag } from "./request.ts";
import { adapterOf, type ServeContext } from "./serve_context.ts";

type Json = Record<string, unknown>;

function tokenizerOf(ctx: ServeContext) {
  if (!ctx.tokenizer) throw new HttpError(400, "this model directory has no tokenizer");
  return ctx.tokenizer;
}

export function tokenize(ctx: ServeContext, body: Json): Response {
  checkParameters(body, "tokenize");
  adapterOf(ctx, body.model);
  const tokenizer = tokenizerOf(ctx);
  let tokens: number[];
  if (body.messages !== undefined) {
    if (body.prompt !== undefined) {
      throw new HttpError(400, "send prompt or messages, not both", undefined, "prompt");
    }
    tokens = renderChat(tokenizer, { ...body, tool_choice: "none" }).prompt;
  } else if (typeof body.prompt === "string") {
    tokens = tokenizer.encode(body.prompt);
  } else {
    throw new HttpError(400, "prompt must be a string (or send messages)", undefined, "prompt");
  }
  return Response.json({
    count: tokens.length,
    max_model_len: ctx.maxModelLen,
    tokens,
    token_strs: flag(body, "return_token_strs", false) ? tokens.map((t) => tokenizer.decode([t])) : null,
  });
}

export function detokenize(ctx: ServeContext, body: Json): Response {
  checkParameters(body, "detokenize");
  adapterOf(ctx, body.model);
  const tokens = checkTokenIds(body.tokens, ctx.policy.config.vocab_size, "tokens");
  return Response.json({ prompt: tokenizerOf(ctx).decode(tokens) });
}

export function version(): Response {
  return Response.json({ version: TOOLKIT_VERSION });
}
