/**
 * Tool calls in an assistant turn's decoded text, in Qwen3's Hermes format:
 *
 *     <tool_call>
 *     {"name": "calculator", "arguments": {"expression": "2+2"}}
 *     </tool_call>
 *
 * A string-aware scanner, not a regex: after each `<tool_call>` it walks one JSON object, tracking
 * strings and escapes, so a `</tool_call>` inside an argument string does not end the block. The
 * object is then parsed strictly (strict_json.ts: duplicate keys, unsafe characters, depth). Every
 * block yields one `ParsedToolCall`; a bad block yields an `invalid_tool_call` whose `error` is written
 * for the model to read.
 *
 * Two views of one scan (docs/tool_calls.md, "Two views"): `parseToolCalls` gives every block of a
 * rollout turn with its own status (a bad block among good ones is `invalid_tool_call` and the good
 * ones run); `extractToolCalls` is what `deno task serve` returns, all or nothing as vLLM's Hermes
 * parser does (one bad block: no calls, the whole text as content; content is the text before the
 * first `<tool_call>`). As in vLLM, a `<tool_call>` left open whose JSON is complete is a call, and a
 * call without `arguments` is not one.
 *
 * Where calls are looked for (docs/tool_calls.md): only after the last `</think>`, and never after an
 * unclosed `<think>`. A `<tool_call>` the model writes while reasoning is part of its reasoning, not a
 * call. This matches vLLM serving Qwen3 with its reasoning parser on (the reasoning is split off first
 * and the Hermes tool parser sees only the content) and Qwen3's chat template, which renders
 * `content.split('</think>')[-1]` as the content of an assistant turn.
 *
 * @module
 */

import { parseStrictJson } from "./strict_json.ts";

/** One `<tool_call>` block of a turn, parsed or rejected. */
export type ParsedToolCall =
  | {
    ok: true;
    name: string;
    /** The arguments object (null prototype: `__proto__` is a plain key). */
    arguments: Record<string, unknown>;
    /** The arguments JSON text as the model wrote it (the decoded string when it wrote a JSON string). */
    argumentsText: string;
    /** The whole block, `<tool_call>` through `</tool_call>`. */
    raw: string;
  }
  | { ok: false; status: "invalid_tool_call"; error: string; raw: string };

/** Options of `parseToolCalls`. */
export interface ParseOptions {
  /** A call's JSON longer than this many characters is rejected before it is parsed (default 65,536). */
  maxPayloadChars?: number;
}

export const DEFAULT_MAX_PAYLOAD_CHARS = 65_536;

const OPEN = "<tool_call>";
const CLOSE = "</tool_call>";
const THINK_OPEN = "<think>";
const THINK_CLOSE = "</think>";
const TURN_END = /(?:<\|im_end\|>|<\|endoftext\|>)+\s*$/;

/** A block and where it sits in the searched region. */
interface Block {
  call: ParsedToolCall;
  start: number;
  end: number;
}

/** Every tool call of an assistant turn's text, in order (see the module comment for where). */
export function parseToolCalls(text: string, options: ParseOptions = {}): ParsedToolCall[] {
  const maxPayload = options.maxPayloadChars ?? DEFAULT_MAX_PAYLOAD_CHARS;
  return scanBlocks(callRegion(text).replace(TURN_END, ""), maxPayload).map((block) => block.call);
}

/** A well-formed call as `extractToolCalls` returns it. */
export type ExtractedCall = Extract<ParsedToolCall, { ok: true }>;

/** What vLLM's Hermes parser makes of a reply's content: every call or none, and the content left. */
export interface ExtractedCalls {
  calls: ExtractedCall[];
  /** The text before the first `<tool_call>` (null when empty), or the whole text when no call parsed. */
  content: string | null;
}

/**
 * The calls of a reply's content (the text after the reasoning), all or nothing, as vLLM's Hermes
 * parser returns them: without `<tool_call>` the content is unchanged; when every block parses, the
 * calls and the text before the first block (null if empty; text after the calls is dropped); when any
 * block does not parse, no calls and the whole text as content.
 */
export function extractToolCalls(content: string, options: ParseOptions = {}): ExtractedCalls {
  if (!content.includes(OPEN)) return { calls: [], content };
  const maxPayload = options.maxPayloadChars ?? DEFAULT_MAX_PAYLOAD_CHARS;
  const blocks = scanBlocks(content.replace(TURN_END, ""), maxPayload);
  const calls = blocks.flatMap((b) => (b.call.ok ? [b.call] : []));
  if (calls.length < blocks.length) return { calls: [], content };
  const before = content.slice(0, content.indexOf(OPEN));
  return { calls, content: before.length > 0 ? before : null };
}

/**
 * The answer part of an assistant turn: the text after the last `</think>`, with tool-call blocks and
 * a trailing end-of-turn token removed, trimmed. For messages and display.
 */
export function finalAnswerText(text: string): string {
  const region = callRegion(text).replace(TURN_END, "");
  let out = "";
  let pos = 0;
  for (const block of scanBlocks(region, DEFAULT_MAX_PAYLOAD_CHARS)) {
    out += region.slice(pos, block.start);
    pos = block.end;
  }
  out += region.slice(pos);
  return out.trim();
}

/** The part of `text` where calls count: after the last `</think>`, and before an unclosed `<think>`. */
export function callRegion(text: string): string {
  const { start, end } = callRegionBounds(text);
  return text.slice(start, end);
}

function callRegionBounds(text: string): { start: number; end: number } {
  const lastClose = text.lastIndexOf(THINK_CLOSE);
  const start = lastClose >= 0 ? lastClose + THINK_CLOSE.length : 0;
  const unclosed = text.indexOf(THINK_OPEN, start);
  return { start, end: unclosed >= 0 ? unclosed : text.length };
}

/**
 * `text` without the blocks `parseToolCalls` returns as well-formed calls; everything else (reasoning,
 * prose, blocks that did not parse) stays where it was. For a message whose `tool_calls` hold the calls.
 */
export function removeToolCalls(text: string): string {
  const { start, end } = callRegionBounds(text);
  const region = text.slice(start, end);
  let out = text.slice(0, start);
  let pos = 0;
  for (const block of scanBlocks(region.replace(TURN_END, ""), DEFAULT_MAX_PAYLOAD_CHARS)) {
    if (!block.call.ok) continue;
    out += region.slice(pos, block.start);
    pos = block.end;
  }
  return out + region.slice(pos) + text.slice(end);
}

function invalid(error: string, raw: string): ParsedToolCall {
  return { ok: false, status: "invalid_tool_call", error, raw };
}

/** Walks `region` block by block; a bad block is skipped up to its `</tool_call>` (or the end). */
function scanBlocks(region: string, maxPayload: number): Block[] {
  const blocks: Block[] = [];
  let pos = 0;
  for (;;) {
    const start = region.indexOf(OPEN, pos);
    if (start < 0) return blocks;
    const block = scanBlock(region, start, maxPayload);
    blocks.push(block);
    pos = block.end;
  }
}

/** One block starting at `start` (which holds `<tool_call>`). */
function scanBlock(region: string, start: number, maxPayload: number): Block {
  const jsonStart = skipSpace(region, start + OPEN.length);
  const span = jsonSpan(region, jsonStart, maxPayload);
  if (span.kind !== "complete") {
    const close = region.indexOf(CLOSE, span.stoppedAt);
    const end = close < 0 ? region.length : close + CLOSE.length;
    const why = span.kind === "too_long"
      ? `the call is longer than ${maxPayload} characters`
      : span.kind === "not_object"
      ? "expected a JSON object right after <tool_call>"
      : span.kind === "unclosed"
      ? "the JSON object is not closed before </tool_call> (a } or ] missing)"
      : "the JSON object is not complete (the turn ended inside it)";
    return { call: invalid(why, region.slice(start, end)), start, end };
  }
  const afterJson = skipSpace(region, span.end);
  // Left open at the end of the turn with its JSON complete: a call, as vLLM's parser reads it.
  const openAtEnd = afterJson >= region.length;
  if (!openAtEnd && !region.startsWith(CLOSE, afterJson)) {
    const close = region.indexOf(CLOSE, afterJson);
    const end = close < 0 ? region.length : close + CLOSE.length;
    const why = "unexpected text between the JSON object and </tool_call>";
    return { call: invalid(why, region.slice(start, end)), start, end };
  }
  const end = openAtEnd ? region.length : afterJson + CLOSE.length;
  const raw = region.slice(start, end);
  return { call: interpretCall(region.slice(jsonStart, span.end), raw), start, end };
}

function skipSpace(text: string, pos: number): number {
  while (pos < text.length && /\s/.test(text[pos])) pos++;
  return pos;
}

type Span =
  | { kind: "complete"; end: number }
  | { kind: "truncated" | "too_long" | "not_object" | "unclosed"; stoppedAt: number };

/**
 * Where the JSON object starting at `pos` ends, tracking strings and escapes but not validating
 * (strict_json.ts does that). Linear, and stops after `maxPayload` characters. A `</tool_call>` outside
 * every string ends the block with the object still open (`unclosed`): no JSON holds a `<` there, and
 * counting on past it would take the calls after it into this one.
 */
function jsonSpan(text: string, pos: number, maxPayload: number): Span {
  if (pos >= text.length) return { kind: "truncated", stoppedAt: pos };
  if (text[pos] !== "{") return { kind: "not_object", stoppedAt: pos };
  const limit = Math.min(text.length, pos + maxPayload);
  let depth = 0;
  let inString = false;
  for (let i = pos; i < limit; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x3c && text.startsWith(CLOSE, i)) return { kind: "unclosed", stoppedAt: i }; // <
    else if (c === 0x7b || c === 0x5b) depth++; // { [
    else if (c === 0x7d || c === 0x5d) { // } ]
      depth--;
      if (depth === 0) return { kind: "complete", end: i + 1 };
    }
  }
  return limit < text.length
    ? { kind: "too_long", stoppedAt: limit }
    : { kind: "truncated", stoppedAt: text.length };
}

/** The call object's JSON to a call: `{"name": string, "arguments": object | JSON string}`. */
function interpretCall(json: string, raw: string): ParsedToolCall {
  const parsed = parseStrictJson(json);
  if (!parsed.ok) return invalid(`the JSON is not valid: ${parsed.error}`, raw);
  const call = parsed.value;
  if (call === null || typeof call !== "object" || Array.isArray(call)) {
    return invalid("the call must be a JSON object", raw);
  }
  const extra = Object.keys(call).filter((key) => key !== "name" && key !== "arguments");
  if (extra.length > 0) {
    return invalid(`unexpected key ${JSON.stringify(extra[0])}; a call has only "name" and "arguments"`, raw);
  }
  const name = call.name;
  if (typeof name !== "string" || name.trim() === "") {
    return invalid('"name" must be a non-empty string naming the tool', raw);
  }
  const args = callArguments(call.arguments, json, parsed.memberSpans.get("arguments"));
  if (typeof args === "string") return invalid(args, raw);
  return { ok: true, name, arguments: args.value, argumentsText: args.text, raw };
}

/** The arguments object and its text, or an error message. Missing arguments are an error (as vLLM). */
function callArguments(
  value: unknown,
  json: string,
  span: { start: number; end: number } | undefined,
): { value: Record<string, unknown>; text: string } | string {
  if (value === undefined || span === undefined) {
    return '"arguments" is missing; write "arguments": {} for a tool without parameters';
  }
  if (typeof value === "string") {
    const inner = parseStrictJson(value);
    if (!inner.ok) return `"arguments" is a string but not valid JSON: ${inner.error}`;
    if (!isObject(inner.value)) return '"arguments" as a string must hold a JSON object';
    return { value: inner.value, text: value };
  }
  if (!isObject(value)) return '"arguments" must be a JSON object of the tool\'s parameters';
  return { value, text: json.slice(span.start, span.end) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}
