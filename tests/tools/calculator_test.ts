/**
 * The calculator: precedence, exact integers, one documented error for each kind of bad input, and the
 * per-call limit on operations (`rollout.tools.calculator.max_operations`).
 */
import assert from "node:assert/strict";
import { generateArithmeticTasks } from "../../lib/data/arithmetic.ts";
import {
  CalculatorError,
  calculatorTool,
  evaluate,
  formatNumber,
  makeCalculatorTool,
} from "../../lib/tools/calculator.ts";
import { loadTools } from "../../lib/tools/registry.ts";
import { defaultConfig } from "../../lib/config/validate.ts";
import type { ToolContext, ToolResult } from "../../lib/tools/types.ts";

function calc(expression: string): string {
  return formatNumber(evaluate(expression));
}

function rejects(expression: string, message: RegExp): void {
  assert.throws(() => evaluate(expression), (e) => e instanceof CalculatorError && message.test(e.message));
}

Deno.test("precedence: ^ before * and / before + and -, ^ right-associative", () => {
  assert.equal(calc("2+3*4^2"), "50");
  assert.equal(calc("(1+2)*3"), "9");
  assert.equal(calc("2^3^2"), "512");
  assert.equal(calc("100 / 10 / 5"), "2");
  assert.equal(calc("10 - 4 - 3"), "3");
  assert.equal(calc("2 ** 10"), "1024");
});

Deno.test("unary minus binds looser than ^: -2^2 is -4, 2^-1 is 0.5", () => {
  assert.equal(calc("-2^2"), "-4");
  assert.equal(calc("(-2)^2"), "4");
  assert.equal(calc("2^-1"), "0.5");
  assert.equal(calc("3 * -2"), "-6");
  assert.equal(calc("--3"), "3");
  assert.equal(calc("-0"), "0");
});

Deno.test("decimals print with 15 significant digits; integers print exactly", () => {
  assert.equal(calc("0.1 + 0.2"), "0.3");
  assert.equal(calc(".5 * 3"), "1.5");
  assert.equal(calc("1 / 3"), "0.333333333333333");
  assert.equal(calc("999999999999 * 9"), "8999999999991");
  assert.equal(calc("2^53 - 1"), "9007199254740991");
  assert.equal(calc("2^60"), "1.15292150460685e+18");
  assert.equal(calc("10^22"), "1e+22");
});

Deno.test("every arithmetic task's exact integer answer comes out exactly", () => {
  for (const seed of [0, 1, 2]) {
    const options = { numTasks: 300, seed, minOperands: 2, maxOperands: 8, maxValue: 9999 };
    for (const task of generateArithmeticTasks(options)) {
      assert.equal(calc(String(task.meta!.expression)), task.answer, String(task.meta!.expression));
    }
  }
});

Deno.test("names of objects and globals are unknown identifiers", () => {
  for (const name of ["constructor", "__proto__", "toString", "process", "Deno", "sqrt(4)"]) {
    rejects(name, /^unknown identifier "/);
  }
});

Deno.test("1/0, 0/0, 10^400 and 9^9^9 are not finite", () => {
  rejects("1/0", /^result is not finite: division by zero/);
  rejects("0/0", /^result is not finite: 0\/0/);
  rejects("10^400", /^result is not finite: the power is too large/);
  rejects("(-8)^(1/3)", /^result is not finite: not a real number/);
  rejects("0^-1", /^result is not finite: zero to a negative power/);
  rejects("1e300", /^malformed number/);
});

Deno.test("depth, length and magnitude limits are refused with their own messages", () => {
  const cases: [string, RegExp][] = [
    [
      "(".repeat(10_000) + "1" + ")".repeat(10_000),
      /^expression is 20001 characters long; the limit is 1000/,
    ],
    ["(".repeat(400) + "1" + ")".repeat(400), /^expression nests deeper than 100 levels/],
    ["-".repeat(500) + "1", /^expression nests deeper than 100 levels/],
    ["1+".repeat(50_000) + "1", /^expression is 100001 characters long/],
    ["9^9^9", /^result is not finite: the power is too large/],
  ];
  for (const [expression, message] of cases) {
    // No wall-clock bound (a shared CI machine has none to give): the limits are checked by message.
    rejects(expression, message);
  }
});

Deno.test("empty, hex, underscores, exponents and full-width digits are documented errors, never 0", () => {
  rejects("", /^empty expression/);
  rejects("   ", /^empty expression/);
  rejects("0x10", /^malformed number "0x10" at position 1/);
  rejects("1_000", /^malformed number "1_000"/);
  rejects("1e3abc", /^malformed number "1e3abc"/);
  rejects("1.2.3", /^malformed number "1.2.3"/);
  rejects("１２", /^unexpected character "１" at position 1/);
  rejects("2 $ 3", /^unknown identifier "\$"/);
  rejects("2 % 3", /^unexpected character "%"/);
});

Deno.test("syntax errors name the position", () => {
  rejects("(1+2", /^missing "\)" for the "\(" at position 1/);
  rejects("1+2)", /^unexpected "\)" at position 4 \(no matching "\("\)/);
  rejects("2 3", /^unexpected number at position 3 \(an operator is missing\)/);
  rejects("2*", /^expression ends too early/);
  rejects("*2", /^unexpected "\*" at position 1/);
});

Deno.test("the tool returns the value, or a tool_error with the message", async () => {
  const ctx = {} as ToolContext;
  assert.deepEqual(await calculatorTool.run({ expression: "6*7" }, ctx), { status: "ok", output: "42" });
  const bad = await calculatorTool.run({ expression: "1/0" }, ctx) as ToolResult;
  assert.deepEqual(bad, { status: "tool_error", output: "Error: result is not finite: division by zero" });
});

Deno.test("max_operations: one operation per call runs, a second is refused with a tool_error the model can read", async () => {
  const ctx = {} as ToolContext;
  const one = makeCalculatorTool({ maxOperations: 1 });
  // Signs of numbers and parentheses are not operations: an earlier negative result can be fed back.
  for (
    const [expression, value] of [["7 * 5", "35"], ["-4 * 5", "-20"], ["3 - -5", "8"], ["(12) / 4", "3"]]
  ) {
    assert.deepEqual(await one.run({ expression }, ctx), { status: "ok", output: value }, expression);
  }
  const refused = await one.run({ expression: "(7 - 3) * 5" }, ctx) as ToolResult;
  assert.equal(refused.status, "tool_error");
  assert.equal(
    refused.output,
    "Error: the expression holds 2 operations; this calculator does one operation per call: " +
      "compute one step, then use its result in the next call",
  );
  const two = makeCalculatorTool({ maxOperations: 2 });
  assert.deepEqual(await two.run({ expression: "(7 - 3) * 5" }, ctx), { status: "ok", output: "20" });
  assert.match(
    (await two.run({ expression: "2 ^ 2 ^ 2 - 1" }, ctx) as ToolResult).output,
    /holds 3 operations/,
  );
  assert.match(one.description, /one arithmetic operation/);
  // A syntax error is still reported as such, not as a count.
  assert.match((await one.run({ expression: "2 +" }, ctx) as ToolResult).output, /ends too early/);
});

Deno.test("max_operations comes from rollout.tools.calculator; null keeps the calculator unlimited", async () => {
  const ctx = {} as ToolContext;
  const config = defaultConfig();
  const unlimited = (await loadTools(config.rollout.tools)).get("calculator")!;
  assert.deepEqual(await unlimited.run({ expression: "1 + 2 * 3 - 4" }, ctx), { status: "ok", output: "3" });
  const limited = (await loadTools({ ...config.rollout.tools, calculator: { max_operations: 1 } }))
    .get("calculator")!;
  assert.equal((await limited.run({ expression: "1 + 2 * 3" }, ctx) as ToolResult).status, "tool_error");
  assert.deepEqual(await limited.run({ expression: "2 * 3" }, ctx), { status: "ok", output: "6" });
});
