/**
 * Constraints on what a turn may sample, as vLLM's request parameters define them (`deno task serve`,
 * docs/serving.md): a logit bias, an allowed set, a minimum length, bad words and the presence and
 * frequency penalties. Each decode step turns a turn's constraints and the tokens it has sampled so far
 * into one sparse row (`RowConstraints`: ids and biases on the raw logits, or "only these ids"), which the
 * graph applies before the sampler (lib/model/graph/head.ts). A turn without constraints feeds nothing
 * and samples exactly as before.
 *
 * Order and meaning, as vLLM applies them to the raw logits before temperature:
 * - `logitBias`: added to the listed ids' logits.
 * - `allowedTokenIds`: every other id is masked (−∞).
 * - `minTokens` / `minTokensBlocked`: the blocked ids (end of sequence, stop tokens) are masked until
 *   the turn has sampled `minTokens` tokens.
 * - `badWords` (token-id sequences): a one-token word is always masked; a longer one masks its last
 *   token whenever the turn's tokens end with the rest of it.
 * - `presencePenalty`, `frequencyPenalty`: each id sampled c > 0 times in this turn loses
 *   `presence + frequency · c`.
 * - `toolCalls`: inside a `<tool_call>` the turn opened, only the ids that keep the call well formed
 *   (tool_call_guide.ts), within `allowedTokenIds` where both are given.
 *
 * The sampled token's log-prob is that of the distribution sampled from, constraints included.
 *
 * @module
 */

import type { RowConstraints } from "./feeds.ts";
import { type GuidedRow, guidedRow, type ToolCallGuide } from "./tool_call_guide.ts";

/** A turn's constraints (plain data: they cross to the policy's Worker). */
export interface SamplingConstraints {
  /** [token id, bias] pairs added to the raw logits. */
  logitBias?: readonly (readonly [number, number])[];
  /** Only these ids may be sampled. */
  allowedTokenIds?: readonly number[];
  /** Tokens the turn samples before any of `minTokensBlocked` may be sampled. */
  minTokens?: number;
  minTokensBlocked?: readonly number[];
  /** Token sequences the turn may not complete. */
  badWords?: readonly (readonly number[])[];
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Guided tool calls: a call's tokens keep it well formed. */
  toolCalls?: ToolCallGuide;
}

/** Whether `c` constrains anything (an empty object does not). */
export function hasConstraints(c: SamplingConstraints | undefined): c is SamplingConstraints {
  if (!c) return false;
  return (c.logitBias?.length ?? 0) > 0 || c.allowedTokenIds !== undefined ||
    ((c.minTokens ?? 0) > 0 && (c.minTokensBlocked?.length ?? 0) > 0) || (c.badWords?.length ?? 0) > 0 ||
    (c.presencePenalty ?? 0) !== 0 || (c.frequencyPenalty ?? 0) !== 0 || c.toolCalls !== undefined;
}

/** The row to feed for the next token of a turn that has sampled `sampled`; null when nothing applies. */
export function rowConstraints(
  c: SamplingConstraints | undefined,
  sampled: readonly number[],
): RowConstraints | null {
  if (!hasConstraints(c)) return null;
  const bias = new Map<number, number>();
  const add = (id: number, value: number) => bias.set(id, (bias.get(id) ?? 0) + value);
  for (const [id, value] of c.logitBias ?? []) add(id, value);
  if (sampled.length < (c.minTokens ?? 0)) { for (const id of c.minTokensBlocked ?? []) add(id, -Infinity); }
  for (const word of c.badWords ?? []) {
    if (endsWith(sampled, word, word.length - 1)) add(word[word.length - 1], -Infinity);
  }
  addPenalties(c, sampled, add);
  const guided = c.toolCalls ? guidedRow(c.toolCalls, sampled) : null;
  if (guided?.banned) { for (const id of guided.ids) add(id, -Infinity); }
  const allowed = allowedIds(c.allowedTokenIds, guided);
  if (allowed !== undefined) {
    const ids = [...new Set(allowed)];
    return { onlyListed: true, ids, bias: ids.map((id) => bias.get(id) ?? 0) };
  }
  if (bias.size === 0) return null;
  return { onlyListed: false, ids: [...bias.keys()], bias: [...bias.values()] };
}

/**
 * The ids the row may sample: `allowedTokenIds`, narrowed inside a guided tool call (whose banned ids
 * are already biased to −∞); undefined: any. Where no id is both listed and in the call's grammar, the
 * call's ids: a row with no id would be fed as unconstrained (feeds.ts), so the turn would sample anything.
 */
function allowedIds(
  listed: readonly number[] | undefined,
  guided: GuidedRow | null,
): readonly number[] | undefined {
  if (guided === null || guided.banned) return listed;
  if (listed === undefined) return guided.ids;
  const keep = new Set(listed);
  const both = guided.ids.filter((id) => keep.has(id));
  return both.length > 0 ? both : guided.ids;
}

/** Whether `tokens` ends with the first `n` entries of `word` (n = 0: always). */
function endsWith(tokens: readonly number[], word: readonly number[], n: number): boolean {
  if (n > tokens.length) return false;
  for (let i = 0; i < n; i++) if (tokens[tokens.length - n + i] !== word[i]) return false;
  return true;
}

function addPenalties(
  c: SamplingConstraints,
  sampled: readonly number[],
  add: (id: number, value: number) => void,
): void {
  const presence = c.presencePenalty ?? 0;
  const frequency = c.frequencyPenalty ?? 0;
  if (presence === 0 && frequency === 0) return;
  const counts = new Map<number, number>();
  for (const id of sampled) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, count] of counts) add(id, -(presence + frequency * count));
}
