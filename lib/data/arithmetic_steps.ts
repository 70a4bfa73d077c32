/**
 * The one-operation steps that evaluate an arithmetic task's expression, in the order a careful person
 * (or a calculator that does one operation per call) takes them: `(7 - 3) * 5` is `7 - 3` = 4, then
 * `4 * 5` = 20. Each step's left operand or right operand may be an earlier step's result, written as
 * the calculator prints it (`-4`, `12`), so a chain of calls can feed each result into the next call.
 *
 * Integer expressions only (what `generateArithmeticTasks` writes: integers, `+ - * /`, parentheses),
 * evaluated exactly with BigInt, `*` and `/` before `+` and `-`, left to right. A division that is not
 * exact is a bug in the caller (the generator never writes one) and throws.
 *
 * @module
 */

/** One operation: its expression (two numbers and an operator) and its exact result. */
export interface OperationStep {
  expression: string;
  result: string;
}

type Op = "+" | "-" | "*" | "/";
const PRECEDENCE: Record<Op, number> = { "+": 1, "-": 1, "*": 2, "/": 2 };

/** The steps of `expression`, in evaluation order; the last step's result is the expression's value. */
export function operationSteps(expression: string): OperationStep[] {
  const tokens = expression.match(/\d+|[-+*/()]|\S/g) ?? [];
  const values: bigint[] = [];
  const ops: Array<Op | "("> = [];
  const steps: OperationStep[] = [];
  const apply = () => {
    const op = ops.pop() as Op;
    const right = values.pop()!;
    const left = values.pop()!;
    const result = compute(left, op, right, expression);
    steps.push({ expression: `${left} ${op} ${right}`, result: result.toString() });
    values.push(result);
  };
  for (const token of tokens) {
    if (/^\d+$/.test(token)) values.push(BigInt(token));
    else if (token === "(") ops.push("(");
    else if (token === ")") {
      while (ops.length > 0 && ops.at(-1) !== "(") apply();
      if (ops.pop() !== "(") throw new Error(`operationSteps: unbalanced ")" in ${expression}`);
    } else if (token in PRECEDENCE) {
      const op = token as Op;
      while (ops.length > 0 && ops.at(-1) !== "(" && PRECEDENCE[ops.at(-1) as Op] >= PRECEDENCE[op]) apply();
      ops.push(op);
    } else throw new Error(`operationSteps: unexpected ${JSON.stringify(token)} in ${expression}`);
  }
  while (ops.length > 0) apply();
  if (values.length !== 1) throw new Error(`operationSteps: malformed expression ${expression}`);
  return steps;
}

function compute(left: bigint, op: Op, right: bigint, expression: string): bigint {
  if (op === "+") return left + right;
  if (op === "-") return left - right;
  if (op === "*") return left * right;
  if (right === 0n || left % right !== 0n) {
    throw new Error(`operationSteps: inexact division ${left} / ${right} in ${expression}`);
  }
  return left / right;
}
