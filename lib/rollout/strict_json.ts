/**
 * A strict JSON parser for model-written tool calls, where `JSON.parse` is too forgiving or too quiet:
 * - a duplicate key is an error (`JSON.parse` silently keeps the last one, so the model's call and
 *   what runs could differ);
 * - objects have a null prototype, so a `__proto__` key is plain data and looking up a missing key never
 *   finds an inherited `toString` / `constructor`;
 * - strings holding a lone surrogate, NUL or a bidi control are errors (see sanitize.ts);
 * - nesting deeper than `maxDepth` is an error instead of a stack overflow;
 * - every error names the character position.
 * Otherwise it accepts exactly RFC 8259 JSON (what `JSON.parse` accepts).
 *
 * @module
 */

import { findUnsafeChar } from "./sanitize.ts";

/** A parsed value (objects have a null prototype). */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** The result of `parseStrictJson`: the value and, for a top-level object, each member's source span. */
export type StrictJsonResult =
  | { ok: true; value: JsonValue; memberSpans: Map<string, { start: number; end: number }> }
  | { ok: false; error: string };

/** Default cap on nesting of arrays and objects. */
export const DEFAULT_MAX_DEPTH = 64;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const ESCAPES: Record<string, string> = {
  '"': '"',
  "\\": "\\",
  "/": "/",
  b: "\b",
  f: "\f",
  n: "\n",
  r: "\r",
  t: "\t",
};

class JsonSyntaxError extends Error {}

/** Parses `text` as one JSON value (whitespace around it allowed). */
export function parseStrictJson(text: string, options: { maxDepth?: number } = {}): StrictJsonResult {
  const parser = new Parser(text, options.maxDepth ?? DEFAULT_MAX_DEPTH);
  try {
    parser.skipSpace();
    const value = parser.value(0);
    parser.skipSpace();
    if (parser.pos < text.length) parser.fail(`unexpected ${parser.describeHere()} after the JSON value`);
    return { ok: true, value, memberSpans: parser.memberSpans };
  } catch (error) {
    if (error instanceof JsonSyntaxError) return { ok: false, error: error.message };
    throw error;
  }
}

class Parser {
  pos = 0;
  readonly memberSpans = new Map<string, { start: number; end: number }>();

  constructor(readonly text: string, readonly maxDepth: number) {}

  fail(why: string): never {
    throw new JsonSyntaxError(`${why} (at character ${this.pos})`);
  }

  describeHere(): string {
    if (this.pos >= this.text.length) return "end of text";
    return JSON.stringify(this.text.slice(this.pos, this.pos + 12));
  }

  skipSpace(): void {
    while (this.pos < this.text.length) {
      const c = this.text[this.pos];
      if (c !== " " && c !== "\n" && c !== "\r" && c !== "\t") return;
      this.pos++;
    }
  }

  value(depth: number): JsonValue {
    const c = this.text[this.pos];
    if (c === "{") return this.object(depth + 1);
    if (c === "[") return this.array(depth + 1);
    if (c === '"') return this.string();
    if (c === "-" || (c >= "0" && c <= "9")) return this.number();
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return value;
      }
    }
    return this.fail(
      this.pos >= this.text.length ? "the JSON ends too early" : `unexpected ${this.describeHere()}`,
    );
  }

  object(depth: number): JsonValue {
    if (depth > this.maxDepth) this.fail(`objects and arrays nest deeper than ${this.maxDepth}`);
    const out: { [key: string]: JsonValue } = Object.create(null);
    this.pos++; // {
    this.skipSpace();
    if (this.text[this.pos] === "}") {
      this.pos++;
      return out;
    }
    for (;;) {
      if (this.text[this.pos] !== '"') this.expected("a quoted key");
      const keyAt = this.pos;
      const key = this.string();
      if (Object.hasOwn(out, key)) {
        this.pos = keyAt;
        this.fail(`duplicate key ${JSON.stringify(key)}`);
      }
      this.skipSpace();
      if (this.text[this.pos] !== ":") this.expected('":"');
      this.pos++;
      this.skipSpace();
      const start = this.pos;
      // defineProperty, not assignment: on a null-prototype object both are plain data, but this
      // states the intent for `__proto__`.
      Object.defineProperty(out, key, { value: this.value(depth), enumerable: true, writable: true });
      if (depth === 1) this.memberSpans.set(key, { start, end: this.pos });
      this.skipSpace();
      const c = this.text[this.pos];
      this.pos++;
      if (c === "}") return out;
      if (c !== ",") {
        this.pos--;
        this.expected('"," or "}"');
      }
      this.skipSpace();
    }
  }

  array(depth: number): JsonValue {
    if (depth > this.maxDepth) this.fail(`objects and arrays nest deeper than ${this.maxDepth}`);
    const out: JsonValue[] = [];
    this.pos++; // [
    this.skipSpace();
    if (this.text[this.pos] === "]") {
      this.pos++;
      return out;
    }
    for (;;) {
      out.push(this.value(depth));
      this.skipSpace();
      const c = this.text[this.pos];
      this.pos++;
      if (c === "]") return out;
      if (c !== ",") {
        this.pos--;
        this.expected('"," or "]"');
      }
      this.skipSpace();
    }
  }

  expected(what: string): never {
    return this.fail(
      this.pos >= this.text.length
        ? "the JSON ends too early"
        : `expected ${what}, got ${this.describeHere()}`,
    );
  }

  string(): string {
    const start = this.pos;
    this.pos++; // opening quote
    let out = "";
    let runStart = this.pos;
    for (;;) {
      if (this.pos >= this.text.length) {
        this.pos = start;
        this.fail("unterminated string: the JSON ends too early");
      }
      const code = this.text.charCodeAt(this.pos);
      if (code === 0x22) break; // closing quote
      if (code < 0x20) {
        this.fail("raw control character (such as a newline) inside a string; escape it as \\n");
      }
      if (code !== 0x5c) {
        this.pos++;
        continue;
      }
      out += this.text.slice(runStart, this.pos);
      out += this.escape();
      runStart = this.pos;
    }
    out += this.text.slice(runStart, this.pos);
    this.pos++; // closing quote
    const unsafe = findUnsafeChar(out);
    if (unsafe !== undefined) {
      this.pos = start;
      this.fail(`a string holds ${unsafe.kind}, which tool arguments may not contain`);
    }
    return out;
  }

  /** Decodes one backslash escape at `pos`, leaving `pos` after it. */
  escape(): string {
    const c = this.text[this.pos + 1];
    if (c === "u") {
      const digits = this.text.slice(this.pos + 2, this.pos + 6);
      if (!/^[0-9a-fA-F]{4}$/.test(digits)) this.fail("bad \\u escape: it needs four hex digits");
      this.pos += 6;
      return String.fromCharCode(parseInt(digits, 16));
    }
    const decoded = c === undefined ? undefined : ESCAPES[c];
    if (decoded === undefined) this.fail(`bad escape \\${c ?? ""} inside a string`);
    this.pos += 2;
    return decoded;
  }

  number(): number {
    NUMBER.lastIndex = this.pos;
    const match = NUMBER.exec(this.text);
    if (match === null) return this.fail(`bad number ${this.describeHere()}`);
    this.pos += match[0].length;
    const value = Number(match[0]);
    if (!Number.isFinite(value)) this.fail(`number ${match[0]} is too large`);
    return value;
  }
}
