/**
 * Guided tool calls (`rollout.generation.guided_tool_calls`): once a turn has opened a `<tool_call>`
 * (outside `<think>`), each token it samples until `</tool_call>` must keep the call's body a prefix of a
 * well-formed call of one of the offered tools (call_grammar.ts); `</tool_call>` itself only once the body
 * is complete. Outside a call nothing is constrained: the model still decides whether to call, and
 * what to write in a string argument. This is vLLM's structured-output idea (a grammar masks the logits
 * each step) applied to the Hermes format, as TRL's `vllm_guided_decoding_regex` applies a regex to GRPO's
 * rollouts; the model's own text decides everything the grammar leaves open.
 *
 * The guide is plain data (it crosses to the policy's Worker with the turn's constraints): the offered
 * tools and the text of every token id. The automaton and the allowed ids of each state it reaches are
 * computed once per guide `key` and kept (a string argument's inside is one state, so a turn visits a few
 * dozen states whatever it writes). Each state costs one pass over the vocabulary.
 *
 * @module
 */

import { CallGrammar, type GuidedTool } from "./call_grammar.ts";

export type { GuidedParam, GuidedTool } from "./call_grammar.ts";

/** What guided tool calls need to know (lib/rollout/guided_calls.ts builds it from a tokenizer). */
export interface ToolCallGuide {
  /** Identifies the tools and the vocabulary: the automaton and its allowed ids are cached by it. */
  key: string;
  open: number; // <tool_call>
  close: number; // </tool_call>
  thinkOpen: number; // <think>
  thinkClose: number; // </think>
  /** Each token id's text; null for control tokens (never inside a call's body). */
  texts: readonly (string | null)[];
  tools: readonly GuidedTool[];
  /**
   * The turn starts inside a call whose body so far is this text (its `<tool_call>` is in the prompt:
   * serve's `tool_choice` `required` or a named function); absent: the turn starts outside any call.
   */
  opened?: string;
}

/**
 * What a guided row may sample: only `ids`, or anything but `ids` (`banned`, where the grammar allows most
 * of the vocabulary, as inside a string: the shorter list is what the graph is fed).
 */
export interface GuidedRow {
  ids: readonly number[];
  banned: boolean;
}

interface Compiled {
  grammar: CallGrammar;
  /** What each state allows. */
  rows: Map<string, GuidedRow>;
}

/** Guides kept compiled, by key (a process rarely has more than one set of tools and vocabulary). */
const compiled = new Map<string, Compiled>();
const KEEP = 8;

/**
 * What the turn may sample next, having sampled `sampled`: null where the guide constrains nothing
 * (outside a call, inside `<think>`, an unguided tool's arguments, or a body the guide did not write).
 */
export function guidedRow(guide: ToolCallGuide, sampled: readonly number[]): GuidedRow | null {
  const open = openCall(guide, sampled);
  if (open === null) return null;
  const c = compile(guide);
  let text = open.written;
  for (const id of sampled.slice(open.from)) text += guide.texts[id] ?? "\u0000"; // a control token breaks the body
  const state = c.grammar.advance(c.grammar.start(), text);
  if (state.length === 0 || c.grammar.free(state)) return null;
  const key = state.join(",");
  let row = c.rows.get(key);
  if (row === undefined) {
    row = rowOf(guide, allowedIds(guide, c.grammar, state));
    c.rows.set(key, row);
  }
  return row;
}

/** The ids the turn may sample next (`guidedRow` as a list of allowed ids); null: any. */
export function guidedTokenIds(guide: ToolCallGuide, sampled: readonly number[]): number[] | null {
  const row = guidedRow(guide, sampled);
  if (!row || !row.banned) return row ? [...row.ids] : null;
  const banned = new Set(row.ids);
  return guide.texts.map((_, id) => id).filter((id) => !banned.has(id));
}

function rowOf(guide: ToolCallGuide, allowed: number[]): GuidedRow {
  if (allowed.length <= guide.texts.length / 2) return { ids: allowed, banned: false };
  const listed = new Set(allowed);
  return { ids: guide.texts.map((_, id) => id).filter((id) => !listed.has(id)), banned: true };
}

/**
 * The call left open in `sampled`: where its sampled body starts (after its `<tool_call>`) and the body
 * written before that (the guide's `opened` for a call the prompt opened); null when none is open.
 */
function openCall(
  guide: ToolCallGuide,
  sampled: readonly number[],
): { from: number; written: string } | null {
  let thinking = false;
  let open = guide.opened === undefined ? null : { from: 0, written: guide.opened };
  for (let i = 0; i < sampled.length; i++) {
    const id = sampled[i];
    if (open !== null) {
      if (id === guide.close) open = null;
    } else if (id === guide.thinkOpen) thinking = true;
    else if (id === guide.thinkClose) thinking = false;
    else if (id === guide.open && !thinking) open = { from: i + 1, written: "" };
  }
  return open;
}

function compile(guide: ToolCallGuide): Compiled {
  let c = compiled.get(guide.key);
  if (!c) {
    c = { grammar: new CallGrammar(guide.tools), rows: new Map() };
    if (compiled.size >= KEEP) compiled.delete(compiled.keys().next().value!);
    compiled.set(guide.key, c);
  }
  return c;
}

/** The ids whose text the grammar accepts from `state`, and `</tool_call>` where the body is complete. */
function allowedIds(guide: ToolCallGuide, grammar: CallGrammar, state: readonly number[]): number[] {
  const out: number[] = [];
  guide.texts.forEach((text, id) => {
    if (text && grammar.advance(state, text).length > 0) out.push(id);
  });
  if (grammar.complete(state)) out.push(guide.close);
  return out;
}
