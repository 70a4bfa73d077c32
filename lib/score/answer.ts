/**
 * Where the final answer sits in a model's last message, shared by gsm8k, exact_match and format.
 *
 * The reasoning (`<think>…</think>`, or everything after an unclosed `<think>`) and `<tool_call>`
 * blocks are removed first (lib/rollout/tool_calls.ts `finalAnswerText`, the rule the rollout uses); then, in this order, the last of:
 * 1. `#### ANSWER` (GSM8K's convention): the rest of that line;
 * 2. `\boxed{ANSWER}` (balanced braces);
 * 3. `Final answer: ANSWER` / `The final answer is ANSWER` (any case): the rest of that line;
 * 4. `The answer is ANSWER`: the rest of that line.
 * `marker` says which one matched; none matching gives `undefined` (gsm8k then falls back to the
 * last number of the text).
 *
 * @module
 */

import { finalAnswerText } from "../rollout/tool_calls.ts";

/** A located final answer: its text and where it ends in the visible text. */
export interface AnswerSpan {
  marker: "####" | "boxed" | "final_answer" | "answer_is";
  text: string;
  /** Index in `visible` just past the answer (past the line, or past the closing brace). */
  end: number;
}

/** The text a reader sees: reasoning and tool-call blocks removed (the rollout's own rule). */
export function visibleText(content: string): string {
  return finalAnswerText(content);
}

/** The last line-ended span after `pattern` in `text` (pattern must be a global regex). */
function lastLineAfter(text: string, pattern: RegExp): { text: string; end: number } | undefined {
  let found: { text: string; end: number } | undefined;
  for (const m of text.matchAll(pattern)) {
    const start = m.index! + m[0].length;
    const nl = text.indexOf("\n", start);
    const end = nl < 0 ? text.length : nl;
    const span = text.slice(start, end).trim();
    if (span) found = { text: span, end };
  }
  return found;
}

/** The content of the last `\boxed{…}` with balanced braces. */
function lastBoxed(text: string): { text: string; end: number } | undefined {
  const at = text.lastIndexOf("\\boxed");
  if (at < 0) return undefined;
  let i = text.indexOf("{", at);
  if (i < 0 || text.slice(at + 6, i).trim() !== "") return undefined;
  const start = ++i;
  for (let depth = 1; i < text.length; i++) {
    if (text[i] === "{") depth++;
    else if (text[i] === "}" && --depth === 0) return { text: text.slice(start, i).trim(), end: i + 1 };
  }
  return undefined;
}

/** The final answer of `visible` text by the markers above, or undefined. */
export function findAnswer(visible: string): AnswerSpan | undefined {
  const hashes = lastLineAfter(visible, /####/g);
  if (hashes) return { marker: "####", ...hashes };
  const boxed = lastBoxed(visible);
  if (boxed) return { marker: "boxed", ...boxed };
  const final = lastLineAfter(visible, /final answer(?: is)?\s*[:：]?/gi);
  if (final) return { marker: "final_answer", ...final };
  const is = lastLineAfter(visible, /\bthe answer is\s*[:：]?/gi);
  if (is) return { marker: "answer_is", ...is };
  return undefined;
}
