/**
 * A synthetic task that needs the calculator: evaluate an integer expression such as
 * `4821 * 37 - 1290 / 5`, with the usual precedence (`*` and `/` before `+` and `-`, left to right).
 *
 * Exactness, by construction:
 * - operands are integers in [1, maxValue] (a `*` operand in [2, maxValue]);
 * - a `/` is only emitted when its divisor divides the running product-quotient term exactly, so every
 *   intermediate value is an integer (no rounding, no remainders);
 * - a `*` is only emitted while the term stays at most 1e12 in magnitude, so every partial result is far
 *   below 2^53 and a double-precision calculator gets the same exact answer;
 * - the answer is computed with BigInt and written as a plain integer string (it may be negative).
 *
 * Deterministic: the same options give the same tasks (mulberry32, see random.ts), and the first k tasks
 * do not depend on `numTasks`.
 *
 * `order: "left_to_right"` writes the expression with parentheses so that it evaluates from left to
 * right, one operation after the other: `(7 - 3) * 5`, `((7 - 3) * 5) / 4`. Every intermediate value is
 * an exact integer, so each step can go to a calculator that does one operation per call
 * (`rollout.tools.calculator.max_operations: 1`), fed the previous result (`operationSteps`, steps.ts).
 */
import { UserError } from "../errors.ts";
import { ARITHMETIC_ORDERS, type ArithmeticOrder } from "../config/sections/model.ts";
import { mulberry32, pick, randomInt, type Rng } from "./random.ts";
import type { Task } from "./task.ts";

/** Options for `generateArithmeticTasks`. */
export interface ArithmeticOptions {
  /** How many tasks. */
  numTasks: number;
  /** PRNG seed; the same seed gives the same tasks. */
  seed: number;
  /** Fewest operands in an expression (at least 2). */
  minOperands: number;
  /** Most operands in an expression (at least minOperands). */
  maxOperands: number;
  /** Largest operand (at least 2). */
  maxValue: number;
  /** `precedence` (default): `*` and `/` before `+` and `-`; `left_to_right`: parenthesized steps. */
  order?: ArithmeticOrder;
}

export { ARITHMETIC_ORDERS, type ArithmeticOrder };

/** Products never exceed this magnitude, which keeps double-precision evaluation exact. */
export const MAX_TERM = 1_000_000_000_000n;

type Op = "+" | "-" | "*" | "/";

/** Generates `numTasks` calculator tasks; ids are `arith-{seed}-{i}`. */
export function generateArithmeticTasks(options: ArithmeticOptions): Task[] {
  checkOptions(options);
  const rng = mulberry32(options.seed);
  const tasks: Task[] = [];
  for (let i = 0; i < options.numTasks; i++) {
    const draw = options.order === "left_to_right" ? randomChain : randomExpression;
    const { expression, value } = draw(rng, options);
    tasks.push({
      id: `arith-${options.seed}-${i}`,
      source: "arithmetic",
      prompt: `Compute ${expression}. Use the calculator tool.`,
      answer: value.toString(),
      meta: { expression },
    });
  }
  return tasks;
}

/**
 * Draws one expression left to right. `sum` holds the finished additive terms, `term` the running
 * product/quotient (with its sign), so each operator's admissibility is checked against exact values.
 */
function randomExpression(rng: Rng, o: ArithmeticOptions): { expression: string; value: bigint } {
  const count = randomInt(rng, o.minOperands, o.maxOperands);
  const first = randomInt(rng, 1, o.maxValue);
  let text = String(first);
  let sum = 0n;
  let term = BigInt(first);
  for (let k = 1; k < count; k++) {
    const divisors = exactDivisors(term, o.maxValue);
    const op = pick(rng, allowedOps(term, divisors.length > 0));
    let operand: number;
    if (op === "/") {
      operand = pick(rng, divisors);
      term /= BigInt(operand);
    } else if (op === "*") {
      operand = randomInt(rng, 2, Math.min(o.maxValue, Number(MAX_TERM / abs(term))));
      term *= BigInt(operand);
    } else {
      operand = randomInt(rng, 1, o.maxValue);
      sum += term;
      term = BigInt(op === "+" ? operand : -operand);
    }
    text += ` ${op} ${operand}`;
  }
  return { expression: text, value: sum + term };
}

/**
 * Draws one left-to-right chain: `value` is the exact result so far, each operator applies to all of it,
 * and the text so far is parenthesized before the next operator (from the third operand on).
 */
function randomChain(rng: Rng, o: ArithmeticOptions): { expression: string; value: bigint } {
  const count = randomInt(rng, o.minOperands, o.maxOperands);
  const first = randomInt(rng, 1, o.maxValue);
  let text = String(first);
  let value = BigInt(first);
  for (let k = 1; k < count; k++) {
    const divisors = exactDivisors(value, o.maxValue);
    const op = pick(rng, allowedOps(value, divisors.length > 0));
    let operand: number;
    if (op === "/") operand = pick(rng, divisors);
    else if (op === "*") {
      const room = value === 0n ? o.maxValue : Number(MAX_TERM / abs(value));
      operand = randomInt(rng, 2, Math.min(o.maxValue, room));
    } else operand = randomInt(rng, 1, o.maxValue);
    const b = BigInt(operand);
    value = op === "+" ? value + b : op === "-" ? value - b : op === "*" ? value * b : value / b;
    text = `${k >= 2 ? `(${text})` : text} ${op} ${operand}`;
  }
  return { expression: text, value };
}

/** `+` and `-` always; `*` while the term can still double; `/` when an exact divisor exists. */
function allowedOps(term: bigint, canDivide: boolean): Op[] {
  const ops: Op[] = ["+", "-"];
  if (abs(term) * 2n <= MAX_TERM) ops.push("*");
  if (canDivide) ops.push("/");
  return ops;
}

/** Divisors d of `term` with 2 ≤ d ≤ maxValue and d < |term| (so the quotient is not just 1). */
function exactDivisors(term: bigint, maxValue: number): number[] {
  // |term| ≤ MAX_TERM < 2^53, so Number arithmetic is exact here.
  const magnitude = Number(abs(term));
  const limit = Math.min(maxValue, magnitude - 1);
  const out: number[] = [];
  for (let d = 2; d <= limit; d++) {
    if (magnitude % d === 0) out.push(d);
  }
  return out;
}

function abs(x: bigint): bigint {
  return x < 0n ? -x : x;
}

function checkOptions(o: ArithmeticOptions): void {
  const rules: Array<[keyof ArithmeticOptions, boolean, string]> = [
    ["numTasks", Number.isInteger(o.numTasks) && o.numTasks >= 0, "an integer ≥ 0"],
    ["seed", Number.isFinite(o.seed), "a finite number"],
    ["minOperands", Number.isInteger(o.minOperands) && o.minOperands >= 2, "an integer ≥ 2"],
    [
      "maxOperands",
      Number.isInteger(o.maxOperands) && o.maxOperands >= o.minOperands,
      "an integer ≥ minOperands",
    ],
    [
      "maxValue",
      Number.isInteger(o.maxValue) && o.maxValue >= 2 && o.maxValue <= 1_000_000,
      "an integer in [2, 1e6]",
    ],
  ];
  const order = o.order ?? "precedence";
  rules.push(["order", ARITHMETIC_ORDERS.includes(order), `one of ${ARITHMETIC_ORDERS.join(", ")}`]);
  for (const [key, ok, expected] of rules) {
    if (ok) continue;
    throw new UserError(`arithmetic option ${key}`, {
      value: o[key],
      why: `it must be ${expected}`,
      fix: `set ${key} to ${expected}`,
    });
  }
}
