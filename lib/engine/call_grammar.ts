/**
 * The grammar of one Hermes tool call's body, as Qwen3 writes it between `<tool_call>` and
 * `</tool_call>` and as its chat template renders one (`tojson`: `": "` and `", "` separators):
 *
 *     \n{"name": "calculator", "arguments": {"expression": "4 * 5"}}\n
 *
 * compiled into a character automaton (an NFA) for guided decoding (tool_call_guide.ts). The name is
 * one of the offered tools'; the arguments object holds that tool's properties in the order of its
 * schema, each required one present, each optional one present or not; a value is what the property's
 * type allows: a JSON string (escapes included), a number, an integer, a boolean, or one of a string
 * enum. A tool with any other kind of property (object, array, untyped) is guided up to its name only:
 * its arguments are left free (`free` state) until `</tool_call>`.
 *
 * String content excludes what the rollout's strict parser rejects as a character (control characters,
 * bidirectional controls: lib/rollout/sanitize.ts); a `\u` escape is not checked for the code point it
 * writes.
 *
 * @module
 */

import { BIDI_CONTROLS } from "../bidi_controls.ts";

/** A property of a guided tool's arguments. */
export interface GuidedParam {
  name: string;
  type: "string" | "number" | "integer" | "boolean";
  required: boolean;
  /** For a string: the only values it may take. */
  enum?: readonly string[];
}

/** An offered tool: its name and its properties (null: arguments not guided). */
export interface GuidedTool {
  name: string;
  params: readonly GuidedParam[] | null;
}

type Test = (c: string) => boolean;

interface Node {
  eps: number[];
  edges: { test: Test; to: number }[];
  /** The body is complete here: only `</tool_call>` may follow. */
  end?: boolean;
  /** Anything may follow, `</tool_call>` included (an unguided tool's arguments). */
  free?: boolean;
}

/** The bidirectional controls the strict parser refuses in a string (lib/bidi_controls.ts). */
export const STRING_BIDI_CONTROLS: ReadonlySet<number> = BIDI_CONTROLS;
const is = (ch: string): Test => (c) => c === ch;
const digit: Test = (c) => c >= "0" && c <= "9";
const nonZero: Test = (c) => c >= "1" && c <= "9";
const hex: Test = (c) => /^[0-9a-fA-F]$/.test(c);
const stringChar: Test = (c) => {
  const code = c.codePointAt(0)!;
  return code >= 0x20 && c !== '"' && c !== "\\" && code !== 0x7f && !STRING_BIDI_CONTROLS.has(code);
};
const escape: Test = (c) => '"\\/bfnrt'.includes(c);

/** The compiled automaton of one set of tools; states are sets of node ids. */
export class CallGrammar {
  readonly #nodes: Node[] = [];
  readonly #start: number[];

  constructor(tools: readonly GuidedTool[]) {
    const end = this.#node({ end: true });
    const names = tools.map((t) =>
      this.#literal(`${JSON.stringify(t.name)}, "arguments": `, this.#arguments(t.params, end))
    );
    this.#start = this.#closure([this.#literal('\n{"name": ', this.#either(names))]);
  }

  /** The state before the body's first character. */
  start(): number[] {
    return this.#start;
  }

  /** The state after `text` from `state`; empty when `text` leaves the grammar. */
  advance(state: readonly number[], text: string): number[] {
    let current = [...state];
    for (const ch of text) {
      if (current.length === 0) break;
      if (current.some((id) => this.#nodes[id].free)) return current;
      const next: number[] = [];
      for (const id of current) {
        for (const e of this.#nodes[id].edges) if (e.test(ch)) next.push(e.to);
      }
      current = this.#closure(next);
    }
    return current;
  }

  /** Whether the body is complete in `state` (`</tool_call>` may follow). */
  complete(state: readonly number[]): boolean {
    return state.some((id) => this.#nodes[id].end || this.#nodes[id].free);
  }

  /** Whether anything may follow in `state` (an unguided tool's arguments). */
  free(state: readonly number[]): boolean {
    return state.some((id) => this.#nodes[id].free);
  }

  #node(extra: Partial<Node> = {}): number {
    this.#nodes.push({ eps: [], edges: [], ...extra });
    return this.#nodes.length - 1;
  }

  #closure(ids: readonly number[]): number[] {
    const seen = new Set<number>();
    const stack = [...ids];
    while (stack.length > 0) {
      const id = stack.pop()!;
      if (seen.has(id)) continue;
      seen.add(id);
      stack.push(...this.#nodes[id].eps);
    }
    return [...seen].sort((a, b) => a - b);
  }

  /** A node that reads `text` and goes on to `next`. */
  #literal(text: string, next: number): number {
    let to = next;
    for (const ch of [...text].reverse()) {
      const id = this.#node();
      this.#nodes[id].edges.push({ test: is(ch), to });
      to = id;
    }
    return to;
  }

  #either(starts: readonly number[]): number {
    return this.#node({ eps: [...starts] });
  }

  /**
   * `{` then the properties, then `}}` closing the arguments and the call, then the newline before
   * `</tool_call>`. Built from the last property back: `none[i]` is "at property i, none written yet",
   * `some[i]` "at property i, some written" (the next one starts with `, `).
   */
  #arguments(params: readonly GuidedParam[] | null, end: number): number {
    if (params === null) return this.#node({ free: true });
    const close = this.#literal("}}\n", end);
    let [none, some] = [close, close];
    for (const p of [...params].reverse()) {
      const key = `${JSON.stringify(p.name)}: `;
      const first = this.#literal(key, this.#value(p, some));
      const next = this.#literal(`, ${key}`, this.#value(p, some));
      [none, some] = p.required ? [first, next] : [this.#either([first, none]), this.#either([next, some])];
    }
    return this.#literal("{", none);
  }

  #value(p: GuidedParam, next: number): number {
    if (p.enum) return this.#either(p.enum.map((v) => this.#literal(JSON.stringify(v), next)));
    if (p.type === "string") return this.#string(next);
    if (p.type === "boolean") {
      return this.#either([this.#literal("true", next), this.#literal("false", next)]);
    }
    return this.#number(next, p.type === "integer");
  }

  /** `"…"`: characters and escapes (`\"`, `\n`, `\u00e9`…) until the closing quote. */
  #string(next: number): number {
    const body = this.#node();
    const esc = this.#node();
    const h4 = this.#node();
    const h3 = this.#node();
    const h2 = this.#node();
    const h1 = this.#node();
    const edge = (from: number, test: Test, to: number) => this.#nodes[from].edges.push({ test, to });
    edge(body, stringChar, body);
    edge(body, is("\\"), esc);
    edge(body, is('"'), next);
    edge(esc, escape, body);
    edge(esc, is("u"), h1);
    edge(h1, hex, h2);
    edge(h2, hex, h3);
    edge(h3, hex, h4);
    edge(h4, hex, body);
    return this.#literal('"', body);
  }

  /** JSON's number: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?` (an integer: no fraction, no exponent). */
  #number(next: number, integer: boolean): number {
    const [start, minus, zero, digits] = [
      this.#node(),
      this.#node(),
      this.#node({ eps: [next] }),
      this.#node(),
    ];
    this.#nodes[digits].eps.push(next);
    const edge = (from: number, test: Test, to: number) => this.#nodes[from].edges.push({ test, to });
    for (const from of [start, minus]) {
      edge(from, is("0"), zero);
      edge(from, nonZero, digits);
    }
    edge(start, is("-"), minus);
    edge(digits, digit, digits);
    if (integer) return start;
    const [dot, fraction, e, sign, exponent] = [
      this.#node(),
      this.#node(),
      this.#node(),
      this.#node(),
      this.#node(),
    ];
    this.#nodes[fraction].eps.push(next);
    this.#nodes[exponent].eps.push(next);
    for (const from of [zero, digits]) edge(from, is("."), dot);
    for (const from of [zero, digits, fraction]) edge(from, (c) => c === "e" || c === "E", e);
    edge(dot, digit, fraction);
    edge(fraction, digit, fraction);
    edge(e, (c) => c === "+" || c === "-", sign);
    for (const from of [e, sign]) edge(from, digit, exponent);
    edge(exponent, digit, exponent);
    return start;
  }
}
