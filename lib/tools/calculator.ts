/**
 * The `calculator` tool: a recursive-descent parser and evaluator for arithmetic on decimal numbers.
 * No `eval`, no expression library.
 *
 * Grammar (one function per rule below):
 *   expression := term (("+" | "-") term)*
 *   term       := unary (("*" | "/") unary)*
 *   unary      := ("-" | "+") unary | power
 *   power      := primary (("^" | "**") unary)?      right-associative: 2^3^2 = 2^9
 *   primary    := number | "(" expression ")"
 *   number     := digits ["." digits] | "." digits
 *
 * Unary minus binds looser than `^`, as in mathematics: `-2^2` = -(2^2) = -4, while `2^-1` = 0.5.
 *
 * Numbers are IEEE doubles. An integer result below 2^53 in magnitude prints as an exact integer
 * (the arithmetic tasks stay below 1e12, so their answers come out exact); other results print with 15
 * significant digits (so 0.1 + 0.2 gives 0.3; 2^60 gives 1.15292150460685e+18). Every failure is a
 * `tool_error` with a message that says what is wrong (see CALCULATOR_LIMITS and docs/sandbox.md);
 * nothing silently becomes 0.
 *
 * `makeCalculatorTool({ maxOperations })` (`rollout.tools.calculator.max_operations`) limits the binary
 * operations (`+ - * / ^`) of one call: a longer expression is refused with a `tool_error` that says how
 * many it holds and to compute one step per call, so a task needs several calls, each fed the last result.
 * Signs of numbers (`-3 * 5`) and parentheses are not operations.
 *
 * @module
 */

import type { Tool, ToolResult } from "./types.ts";

export const CALCULATOR_LIMITS = {
  /** Characters in an expression. */
  maxLength: 1000,
  /** Nesting of parentheses, unary signs and powers. */
  maxDepth: 100,
};

/** A bad expression; `message` is what the model reads. */
export class CalculatorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CalculatorError";
  }
}

type Token =
  | { kind: "number"; value: number; at: number }
  | { kind: "op"; op: "+" | "-" | "*" | "/" | "^" | "(" | ")"; at: number }
  | { kind: "end"; at: number };

const NUMBER = /^(?:\d+(?:\.\d+)?|\.\d+)/;
const IDENTIFIER = /^[A-Za-z_$][\w$]*/;
/** What may not directly follow a number: `0x10`, `1_000`, `1e3`, `1.2.3`. */
const NUMBER_TAIL = /^[\w$.]+/;

/** Splits an expression into numbers and operators, rejecting everything else by name. */
export function tokenize(expression: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expression.length) {
    const rest = expression.slice(i, i + 64);
    const c = expression[i];
    if (c === " " || c === "\t") {
      i++;
    } else if (rest.startsWith("**")) {
      tokens.push({ kind: "op", op: "^", at: i });
      i += 2;
    } else if ("+-*/^()".includes(c)) {
      tokens.push({ kind: "op", op: c as "+", at: i });
      i++;
    } else if (NUMBER.test(rest)) {
      const text = numberText(expression, i);
      tokens.push({ kind: "number", value: Number(text), at: i });
      i += text.length;
    } else if (IDENTIFIER.test(rest)) {
      const name = rest.match(IDENTIFIER)![0];
      throw new CalculatorError(
        `unknown identifier "${name}" at position ${i + 1}: ` +
          "only numbers, + - * / ^ and parentheses are allowed",
      );
    } else {
      const char = String.fromCodePoint(expression.codePointAt(i)!);
      throw new CalculatorError(
        `unexpected character "${char}" at position ${
          i + 1
        }: use ASCII digits, a decimal point, + - * / ^ and parentheses`,
      );
    }
  }
  tokens.push({ kind: "end", at: expression.length });
  return tokens;
}

/** The number starting at `i`, or an error when letters, `_` or a second `.` stick to it. */
function numberText(expression: string, i: number): string {
  const text = expression.slice(i).match(NUMBER)![0];
  const tail = expression.slice(i + text.length, i + text.length + 64).match(NUMBER_TAIL)?.[0];
  if (tail !== undefined) {
    throw new CalculatorError(
      `malformed number "${text}${tail}" at position ${i + 1}: ` +
        "write plain decimals such as 1000 or 2.5 (no hex, underscores or exponents)",
    );
  }
  return text;
}

/** Parses and evaluates; throws CalculatorError with the message the model should see. */
export function evaluate(expression: string): number {
  return evaluateCounted(expression).value;
}

/** Parses and evaluates, counting the binary operations applied (`+ - * / ^`). */
export function evaluateCounted(expression: string): { value: number; operations: number } {
  if (expression.length > CALCULATOR_LIMITS.maxLength) {
    throw new CalculatorError(
      `expression is ${expression.length} characters long; the limit is ${CALCULATOR_LIMITS.maxLength}`,
    );
  }
  if (expression.trim() === "") {
    throw new CalculatorError("empty expression: give an expression such as 2*(3+4)");
  }
  const parser = new Parser(tokenize(expression));
  const value = parser.expression(0);
  parser.expectEnd();
  return { value, operations: parser.operations };
}

class Parser {
  #pos = 0;
  /** Binary operations applied so far. */
  operations = 0;
  constructor(private readonly tokens: Token[]) {}

  expression(depth: number): number {
    let value = this.term(depth);
    for (let t = this.#peek(); t.kind === "op" && (t.op === "+" || t.op === "-"); t = this.#peek()) {
      this.#pos++;
      this.operations++;
      const right = this.term(depth);
      value = finite(t.op === "+" ? value + right : value - right, "overflow");
    }
    return value;
  }

  term(depth: number): number {
    let value = this.unary(depth);
    for (let t = this.#peek(); t.kind === "op" && (t.op === "*" || t.op === "/"); t = this.#peek()) {
      this.#pos++;
      this.operations++;
      const right = this.unary(depth);
      if (t.op === "/" && right === 0) {
        throw new CalculatorError(`result is not finite: ${value === 0 ? "0/0" : "division by zero"}`);
      }
      value = finite(t.op === "*" ? value * right : value / right, "overflow");
    }
    return value;
  }

  unary(depth: number): number {
    checkDepth(depth);
    const t = this.#peek();
    if (t.kind === "op" && (t.op === "-" || t.op === "+")) {
      this.#pos++;
      const value = this.unary(depth + 1);
      return t.op === "-" ? -value : value;
    }
    return this.power(depth);
  }

  power(depth: number): number {
    const base = this.primary(depth);
    const t = this.#peek();
    if (t.kind !== "op" || t.op !== "^") return base;
    this.#pos++;
    this.operations++;
    const exponent = this.unary(depth + 1);
    const value = base ** exponent;
    if (Number.isNaN(value)) throw new CalculatorError("result is not finite: not a real number");
    return finite(value, base === 0 ? "zero to a negative power" : "the power is too large");
  }

  primary(depth: number): number {
    const t = this.tokens[this.#pos++];
    if (t.kind === "number") return t.value;
    if (t.kind === "op" && t.op === "(") {
      checkDepth(depth + 1);
      const value = this.expression(depth + 1);
      const close = this.tokens[this.#pos++];
      if (close.kind !== "op" || close.op !== ")") {
        throw new CalculatorError(`missing ")" for the "(" at position ${t.at + 1}`);
      }
      return value;
    }
    if (t.kind === "end") {
      throw new CalculatorError("expression ends too early: a number is missing at the end");
    }
    throw new CalculatorError(`unexpected "${t.op}" at position ${t.at + 1}: a number or "(" was expected`);
  }

  expectEnd(): void {
    const t = this.#peek();
    if (t.kind === "end") return;
    const what = t.kind === "number" ? "number" : `"${t.op}"`;
    const hint = t.kind === "op" && t.op === ")" ? ' (no matching "(")' : " (an operator is missing)";
    throw new CalculatorError(`unexpected ${what} at position ${t.at + 1}${hint}`);
  }

  #peek(): Token {
    return this.tokens[this.#pos];
  }
}

function checkDepth(depth: number): void {
  if (depth > CALCULATOR_LIMITS.maxDepth) {
    throw new CalculatorError(`expression nests deeper than ${CALCULATOR_LIMITS.maxDepth} levels`);
  }
}

function finite(value: number, why: string): number {
  if (!Number.isFinite(value)) throw new CalculatorError(`result is not finite: ${why} (beyond ±1.8e308)`);
  return value;
}

/** Integers below 2^53 exactly, without exponent; anything else with 15 significant digits. */
export function formatNumber(value: number): string {
  if (Object.is(value, -0)) return "0";
  if (Number.isInteger(value) && Math.abs(value) <= Number.MAX_SAFE_INTEGER) return BigInt(value).toString();
  // Beyond 2^53 not every integer exists as a double: say so with an exponent, never fake digits.
  if (Math.abs(value) > Number.MAX_SAFE_INTEGER) return value.toPrecision(15).replace(/\.?0+e/, "e");
  return String(Number(value.toPrecision(15)));
}

/** Options of `makeCalculatorTool`. */
export interface CalculatorOptions {
  /** Binary operations one call may hold; null = any number. */
  maxOperations?: number | null;
}

/** The refusal of an expression with more operations than one call may hold (what the model reads). */
export function tooManyOperations(operations: number, max: number): string {
  const per = max === 1 ? "one operation per call" : `at most ${max} operations per call`;
  return `Error: the expression holds ${operations} operations; this calculator does ${per}: ` +
    "compute one step, then use its result in the next call";
}

/** The calculator tool: `{ expression }` → the value, or a `tool_error` with the reason. */
export function makeCalculatorTool(options: CalculatorOptions = {}): Tool {
  const max = options.maxOperations ?? null;
  return {
    name: "calculator",
    description: describe(max),
    parameters: {
      type: "object",
      properties: {
        expression: {
          type: "string",
          description: max === 1
            ? "one operation, e.g. 4821 * 37"
            : "the expression, e.g. 4821 * 37 - 1290 / 5",
        },
      },
      required: ["expression"],
      additionalProperties: false,
    },
    run(args): Promise<ToolResult> {
      try {
        const { value, operations } = evaluateCounted(String(args.expression));
        if (max !== null && operations > max) {
          return Promise.resolve({ status: "tool_error", output: tooManyOperations(operations, max) });
        }
        return Promise.resolve({ status: "ok", output: formatNumber(value) });
      } catch (error) {
        if (!(error instanceof CalculatorError)) throw error;
        return Promise.resolve({ status: "tool_error", output: `Error: ${error.message}` });
      }
    },
  };
}

function describe(max: number | null): string {
  if (max === null) {
    return "Evaluate an arithmetic expression with + - * / ^ and parentheses, e.g. (12.5 + 3) * 4^2.";
  }
  if (max === 1) {
    return "Evaluate one arithmetic operation (+ - * / ^), e.g. 12 * 4; call again for the next step.";
  }
  return `Evaluate an arithmetic expression of at most ${max} operations (+ - * / ^) and parentheses; ` +
    "call again for the next steps.";
}

/** The calculator without a limit on operations. */
export const calculatorTool: Tool = makeCalculatorTool();
