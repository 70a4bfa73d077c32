/**
 * One choice of a request: a sequence opened on the policy, one turn sampled, its text built token by
 * token (detokenize.ts) and cut at the first stop string. Streaming and non-streaming requests run the
 * same code, so they return the same tokens and text: a streamed choice's deltas concatenate to the
 * unstreamed choice.
 *
 * Cuts, as vLLM makes them: a stop string ends the turn at the token that completed it (later tokens the
 * engine may already have sampled are dropped) and the text ends before it (after it with
 * `include_stop_str_in_output`); the token that ends a turn by being a stop token is kept in the token
 * ids but not in the text (unless `include_stop_str_in_output`). While streaming, text that could still
 * become a stop string is held back until it cannot.
 *
 * @module
 */

import type { Alternatives, GenerateOptions, Generation, TokenEvent } from "../engine/policy.ts";
import { IncrementalText, StopStrings } from "./detokenize.ts";
import type { ServeContext } from "./serve_context.ts";
import { choiceSeed, type SamplingPlan } from "./request.ts";

/** What one choice samples. */
export interface ChoiceSpec {
  prompt: number[];
  seed: number;
  /** Sampling options of the turn (`maxNewTokens`, temperature, stop tokens, constraints, alternatives). */
  turn: Omit<GenerateOptions, "onToken">;
  stop: readonly string[];
  /** The request's `stop_token_ids` (also in `turn.stopTokens`): reported as the stop reason. */
  stopTokenIds: readonly number[];
  includeStop: boolean;
  decode: (ids: number[]) => string;
  /** Streaming: called with each piece of text that is final, and the tokens sampled since the last. */
  onDelta?: (delta: ChoiceDelta) => void;
}

/** A streamed piece of a choice. */
export interface ChoiceDelta {
  text: string;
  tokens: number[];
  logprobs: number[];
  top?: Alternatives[];
}

/** A finished choice. */
export interface ChoiceResult extends Generation {
  text: string;
  /** The stop string or stop token id that ended the turn (null: the end-of-sequence token, or length). */
  stopReason: string | number | null;
}

/**
 * The spec of choice `i` of a request, as completions and chat both sample it: the plan's sampling, its
 * stop strings and ids, `ends` (the tokens that end a turn unless `ignore_eos`) also blocked until
 * `min_tokens`, and `topLogprobs` alternatives per token.
 */
export function choiceSpec(
  plan: SamplingPlan,
  i: number,
  o: {
    prompt: number[];
    maxTokens: number;
    ends: readonly number[];
    topLogprobs: number;
    decode: ChoiceSpec["decode"];
    onDelta?: ChoiceSpec["onDelta"];
  },
): ChoiceSpec {
  const stopTokens = [...o.ends, ...plan.stopTokenIds];
  return {
    prompt: o.prompt,
    seed: choiceSeed(plan.seed, i),
    turn: {
      maxNewTokens: o.maxTokens,
      temperature: plan.temperature,
      topK: plan.topK,
      topP: plan.topP,
      stopTokens,
      constraints: { ...plan.constraints, minTokensBlocked: stopTokens },
      topLogprobs: o.topLogprobs,
    },
    stop: plan.stop,
    stopTokenIds: plan.stopTokenIds,
    includeStop: plan.includeStop,
    decode: o.decode,
    onDelta: o.onDelta,
  };
}

/** Samples one choice; `signal` (the client hung up) cancels it. */
export async function sampleChoice(
  ctx: ServeContext,
  spec: ChoiceSpec,
  signal?: AbortSignal,
): Promise<ChoiceResult> {
  const run = new ChoiceRun(spec);
  const started = performance.now();
  ctx.metrics.waiting += 1;
  let seq;
  try {
    seq = await ctx.policy.openSequence(spec.prompt, { seed: spec.seed, capacity: ctx.maxModelLen, signal });
  } finally {
    ctx.metrics.waiting -= 1;
  }
  ctx.metrics.running += 1;
  try {
    const turn = await seq.generate({
      ...spec.turn,
      onToken: (e) => {
        if (e.index === 0) ctx.metrics.firstToken(performance.now() - started);
        return run.token(e);
      },
    });
    return run.finish(turn);
  } finally {
    ctx.metrics.running -= 1;
    await seq.close();
  }
}

/** The text and cut of one choice as its tokens arrive. */
class ChoiceRun {
  readonly #spec: ChoiceSpec;
  readonly #text: IncrementalText;
  readonly #stops: StopStrings;
  /** Tokens kept once a stop string matched (null: none yet). */
  #cut: { tokens: number; text: string; stop: string } | null = null;
  /** Characters and tokens already streamed. */
  #sentChars = 0;
  #sentTokens = 0;
  #last: Generation = { tokens: [], logprobs: [], finishReason: "length" };

  constructor(spec: ChoiceSpec) {
    this.#spec = spec;
    this.#text = new IncrementalText(spec.decode);
    this.#stops = new StopStrings(spec.stop, spec.includeStop);
  }

  /** One sampled token; true asks the engine to end the turn (a stop string matched). */
  token(e: TokenEvent): boolean {
    if (this.#cut) return true;
    this.#record(e);
    const endsTurn = this.#spec.turn.stopTokens?.includes(e.token) ?? false;
    const before = this.#text.text.length;
    if (!endsTurn || this.#spec.includeStop) this.#text.push(e.token);
    const match = this.#stops.find(this.#text.text, before);
    if (match) {
      this.#cut = { tokens: e.index + 1, text: this.#text.text.slice(0, match.end), stop: match.stop };
      this.#send(this.#cut.text, this.#cut.tokens);
      return true;
    }
    const text = this.#text.text;
    this.#send(text.slice(0, text.length - this.#stops.holdBack(text)), e.index + 1);
    return false;
  }

  /** The choice once the engine's turn is back: cut, text complete, the last delta sent. */
  finish(turn: Generation): ChoiceResult {
    const cut = this.#cut;
    if (cut) {
      const kept = sliceGeneration(turn, cut.tokens);
      return { ...kept, finishReason: "stop", text: cut.text, stopReason: cut.stop };
    }
    const text = this.#text.flush();
    this.#send(text, turn.tokens.length, turn);
    const last = turn.tokens.at(-1);
    const byStopId = turn.finishReason === "stop" && last !== undefined &&
      this.#spec.stopTokenIds.includes(last);
    return { ...turn, text, stopReason: byStopId ? last! : null };
  }

  #record(e: TokenEvent): void {
    this.#last.tokens.push(e.token);
    this.#last.logprobs.push(e.logprob);
    if (e.top) (this.#last.top ??= []).push(e.top);
  }

  /** Streams the text up to `upTo` characters with the tokens up to `tokens`, if anything is new. */
  #send(text: string, tokens: number, turn: Generation = this.#last): void {
    if (!this.#spec.onDelta) return;
    if (text.length <= this.#sentChars && tokens <= this.#sentTokens) return;
    const from = this.#sentTokens;
    this.#spec.onDelta({
      text: text.slice(this.#sentChars),
      tokens: turn.tokens.slice(from, tokens),
      logprobs: turn.logprobs.slice(from, tokens),
      top: turn.top?.slice(from, tokens),
    });
    this.#sentChars = Math.max(this.#sentChars, text.length);
    this.#sentTokens = Math.max(this.#sentTokens, tokens);
  }
}

function sliceGeneration(turn: Generation, n: number): Generation {
  const out: Generation = {
    tokens: turn.tokens.slice(0, n),
    logprobs: turn.logprobs.slice(0, n),
    finishReason: turn.finishReason,
  };
  if (turn.top) out.top = turn.top.slice(0, n);
  return out;
}
