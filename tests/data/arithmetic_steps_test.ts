/**
 * The multi-step arithmetic task: `data.arithmetic.order: left_to_right` writes `(a op b) op c`, whose
 * answer is exact and which needs one calculator call per operation when the calculator does one
 * operation per call; `operationSteps` gives those calls in order, each fed the result before it.
 */

import assert from "node:assert/strict";
import { generateArithmeticTasks } from "../../lib/data/arithmetic.ts";
import { operationSteps } from "../../lib/data/arithmetic_steps.ts";
import { UserError } from "../../lib/errors.ts";
import { makeCalculatorTool } from "../../lib/tools/calculator.ts";
import type { ToolContext, ToolResult } from "../../lib/tools/types.ts";

/** The test's own evaluator: parentheses dropped, operators applied strictly left to right, exactly. */
function leftToRight(expression: string): bigint {
  const tokens = expression.replace(/[()]/g, "").split(" ");
  let value = BigInt(tokens[0]);
  for (let i = 1; i < tokens.length; i += 2) {
    const [op, operand] = [tokens[i], BigInt(tokens[i + 1])];
    if (op === "/") assert.equal(value % operand, 0n, `${expression}: inexact division`);
    value = op === "+"
      ? value + operand
      : op === "-"
      ? value - operand
      : op === "*"
      ? value * operand
      : value / operand;
  }
  return value;
}

const chains = generateArithmeticTasks({
  numTasks: 300,
  seed: 4,
  minOperands: 3,
  maxOperands: 4,
  maxValue: 9,
  order: "left_to_right",
});

Deno.test("left_to_right tasks need at least two operations, evaluate left to right, and have exact answers", () => {
  const ops = new Set<string>();
  for (const task of chains) {
    const expression = task.meta!.expression as string;
    const operands = expression.replace(/[()]/g, "").split(" ").filter((_, i) => i % 2 === 0);
    assert.ok(operands.length >= 3 && operands.length <= 4, expression);
    assert.ok(operands.every((n) => /^[1-9]$/.test(n)), expression);
    assert.equal(task.answer, leftToRight(expression).toString(), expression);
    // (a op b) op c, ((a op b) op c) op d: each finished step is parenthesized.
    assert.equal(expression.split("(").length - 1, operands.length - 2, expression);
    assert.ok(expression.startsWith(`${"(".repeat(operands.length - 2)}${operands[0]} `), expression);
    const steps = operationSteps(expression);
    assert.equal(steps.length, operands.length - 1, expression);
    assert.ok(steps.length >= 2);
    steps.forEach((step, k) => {
      ops.add(step.expression.split(" ")[1]);
      if (k > 0) {
        assert.ok(step.expression.startsWith(`${steps[k - 1].result} `), `${expression}: ${step.expression}`);
      }
    });
    assert.equal(steps.at(-1)!.result, task.answer);
  }
  assert.deepEqual([...ops].sort(), ["*", "+", "-", "/"]);
});

Deno.test("a one-operation calculator refuses a whole left_to_right task and solves it call by call", async () => {
  const calculator = makeCalculatorTool({ maxOperations: 1 });
  const ctx = {} as ToolContext;
  for (const task of chains.slice(0, 60)) {
    const whole = await calculator.run({ expression: task.meta!.expression }, ctx) as ToolResult;
    assert.equal(whole.status, "tool_error");
    assert.match(whole.output, /one operation per call/);
    let last = "";
    for (const step of operationSteps(task.meta!.expression as string)) {
      const out = await calculator.run({ expression: step.expression }, ctx) as ToolResult;
      assert.deepEqual(out, { status: "ok", output: step.result }, step.expression);
      last = out.output;
    }
    assert.equal(last, task.answer);
  }
});

Deno.test("operationSteps takes * and / before + and - in precedence expressions", () => {
  assert.deepEqual(operationSteps("2 - 3 * 4 + 10 / 5 * 3"), [
    { expression: "3 * 4", result: "12" },
    { expression: "2 - 12", result: "-10" },
    { expression: "10 / 5", result: "2" },
    { expression: "2 * 3", result: "6" },
    { expression: "-10 + 6", result: "-4" },
  ]);
  assert.deepEqual(operationSteps("(7 - 9) * 3"), [
    { expression: "7 - 9", result: "-2" },
    { expression: "-2 * 3", result: "-6" },
  ]);
  assert.throws(() => operationSteps("7 / 2"), /inexact division/);
});

Deno.test("the generator refuses an unknown order with a UserError naming the option", () => {
  const good = { numTasks: 1, seed: 0, minOperands: 3, maxOperands: 3, maxValue: 9 };
  assert.throws(
    () => generateArithmeticTasks({ ...good, order: "backwards" as "left_to_right" }),
    (e) => e instanceof UserError && /order/.test(e.message),
  );
  // The first tasks do not depend on how many are drawn, as with precedence order.
  const many = generateArithmeticTasks({ ...good, numTasks: 9, order: "left_to_right" });
  assert.deepEqual(
    generateArithmeticTasks({ ...good, numTasks: 3, order: "left_to_right" }),
    many.slice(0, 3),
  );
});
