/**
 * Log-probs in the shapes OpenAI and vLLM answer with: completions' `{tokens, token_logprobs,
 * top_logprobs, text_offset}` (each position's alternatives plus the sampled token, keyed by text),
 * chat's `content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]`, and vLLM's
 * `prompt_logprobs` (per position, token id → `{logprob, rank, decoded_token}`). Tokens are their
 * decoded text, or `token_id:N` with `return_tokens_as_token_ids`. JSON has no −∞: it is written −9999.0,
 * as vLLM writes it.
 *
 * @module
 */

import type { Alternatives } from "../engine/policy.ts";
import type { ServeContext } from "./serve_context.ts";

type Json = Record<string, unknown>;

/** A number JSON can carry: −∞ (and NaN) as −9999. */
export function finite(value: number): number {
  return Number.isFinite(value) ? value : -9999;
}

/** A token's text (or `token_id:N`). */
export function tokenText(ctx: ServeContext, id: number, asIds: boolean): string {
  return asIds || !ctx.tokenizer ? `token_id:${id}` : ctx.tokenizer.decode([id]);
}

/** One scored or sampled position: its token, log-prob and alternatives (null: none, e.g. position 0). */
export interface Position {
  token: number;
  logprob: number | null;
  top: Alternatives | null;
}

/**
 * Completions log-probs of `positions`, text offsets counted from `offset` (streamed pieces continue
 * where the last ended). `k` alternatives per position, plus the sampled token.
 */
export function completionLogprobs(
  ctx: ServeContext,
  positions: readonly Position[],
  k: number,
  asIds: boolean,
  offset = 0,
): Json {
  const tokens = positions.map((p) => tokenText(ctx, p.token, asIds));
  let at = offset;
  const textOffset = tokens.map((t) => (at += t.length) - t.length);
  return {
    text_offset: textOffset,
    token_logprobs: positions.map((p) => (p.logprob === null ? null : finite(p.logprob))),
    tokens,
    top_logprobs: positions.map((p, i) => {
      if (p.logprob === null) return null;
      const entries: Json = {};
      p.top?.ids.slice(0, k).forEach((
        id,
        j,
      ) => (entries[tokenText(ctx, id, asIds)] = finite(p.top!.logprobs[j])));
      entries[tokens[i]] = finite(p.logprob);
      return entries;
    }),
  };
}

function chatEntry(ctx: ServeContext, id: number, logprob: number, asIds: boolean): Json {
  const token = tokenText(ctx, id, asIds);
  return { token, logprob: finite(logprob), bytes: Array.from(new TextEncoder().encode(token)) };
}

/** Chat `logprobs.content` entries of sampled positions, with `k` alternatives each. */
export function chatLogprobContent(
  ctx: ServeContext,
  positions: readonly Position[],
  k: number,
  asIds: boolean,
): Json[] {
  return positions.map((p) => ({
    ...chatEntry(ctx, p.token, p.logprob ?? -Infinity, asIds),
    top_logprobs: (p.top?.ids.slice(0, k) ?? []).map((id, j) =>
      chatEntry(ctx, id, p.top!.logprobs[j], asIds)
    ),
  }));
}

/**
 * vLLM's `prompt_logprobs`: null at position 0, then per position the prompt token's entry and its
 * alternatives, keyed by token id. `rank` is given where it is known: for the alternatives, and for the
 * prompt token when it is among them.
 */
export function promptLogprobs(
  ctx: ServeContext,
  positions: readonly Position[],
  asIds: boolean,
): (Json | null)[] {
  return positions.map((p) => {
    if (p.logprob === null) return null;
    const out: Json = {};
    p.top?.ids.forEach((id, j) => {
      out[String(id)] = {
        logprob: finite(p.top!.logprobs[j]),
        rank: j + 1,
        decoded_token: tokenText(ctx, id, asIds),
      };
    });
    if (!(String(p.token) in out)) {
      out[String(p.token)] = { logprob: finite(p.logprob), decoded_token: tokenText(ctx, p.token, asIds) };
    }
    return out;
  });
}

/** Positions of sampled tokens. */
export function sampledPositions(
  tokens: readonly number[],
  logprobs: readonly number[],
  top?: readonly Alternatives[],
): Position[] {
  return tokens.map((token, i) => ({ token, logprob: logprobs[i], top: top?.[i] ?? null }));
}
