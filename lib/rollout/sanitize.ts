/**
 * Text that is safe to store and show: what goes into `tool_calls[].arguments` / `.output` of
 * rollouts.arrow and into tool responses the model reads.
 *
 * The choice (see docs/tool_calls.md):
 * - Stored and shown text is *sanitized*: a lone surrogate, NUL, or a bidirectional control character
 *   becomes U+FFFD. A lone surrogate cannot be encoded as UTF-8 (an Arrow utf8 writer would silently
 *   replace it, so the text read back would differ from the text written); NUL cuts strings short in
 *   C consumers; bidi controls make displayed text lie about its order ("Trojan Source").
 * - Tool *arguments* are checked instead (`findUnsafeChar`): a call whose argument strings hold any of
 *   these is rejected, so a tool never receives them.
 *
 * @module
 */

import { BIDI_CONTROLS } from "../bidi_controls.ts";

/** U+FFFD, what every unsafe character becomes. */
export const REPLACEMENT = "\uFFFD";

export { BIDI_CONTROLS };

/** Why one character is unsafe, or undefined when it is fine. */
function unsafeKind(code: number, next: number, prev: number): string | undefined {
  if (code === 0) return "a NUL character";
  if (BIDI_CONTROLS.has(code)) return `a bidirectional control character (U+${hex(code)})`;
  if (code >= 0xd800 && code <= 0xdbff && !(next >= 0xdc00 && next <= 0xdfff)) {
    return `a lone surrogate (U+${hex(code)})`;
  }
  if (code >= 0xdc00 && code <= 0xdfff && !(prev >= 0xd800 && prev <= 0xdbff)) {
    return `a lone surrogate (U+${hex(code)})`;
  }
  return undefined;
}

function hex(code: number): string {
  return code.toString(16).toUpperCase().padStart(4, "0");
}

/** The first unsafe character of `text` as `{ index, kind }`, or undefined when there is none. */
export function findUnsafeChar(text: string): { index: number; kind: string } | undefined {
  for (let i = 0; i < text.length; i++) {
    const kind = unsafeKind(text.charCodeAt(i), text.charCodeAt(i + 1), text.charCodeAt(i - 1));
    if (kind !== undefined) return { index: i, kind };
  }
  return undefined;
}

/**
 * `text` with every lone surrogate, NUL and bidi control replaced by U+FFFD. The result encodes to
 * UTF-8 and decodes back to itself exactly.
 */
export function sanitizeText(text: string): string {
  if (findUnsafeChar(text) === undefined) return text; // the common case allocates nothing
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    const kind = unsafeKind(code, text.charCodeAt(i + 1), text.charCodeAt(i - 1));
    out += kind === undefined ? text[i] : REPLACEMENT;
  }
  return out;
}

/**
 * `text` cut to at most `maxChars` UTF-16 units without splitting a surrogate pair, with a marker
 * saying how much was kept. Returns `{ text, truncated }`.
 */
export function truncateText(text: string, maxChars: number): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  let end = maxChars;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1; // keep the pair whole: drop its first half
  const marker = `\n[output truncated: ${end} of ${text.length} characters shown]`;
  return { text: text.slice(0, end) + marker, truncated: true };
}
