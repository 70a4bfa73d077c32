/**
 * What the two example agents share: the demo's calculator task as a user's agent sees it — one tool it
 * runs itself (the gateway runs none), and the reward it judges from its final answer.
 *
 * @module
 */

import { CalculatorError, evaluate, formatNumber } from "../../lib/tools/calculator.ts";

export const CALCULATOR = {
  name: "calculator",
  description: "Evaluates an arithmetic expression (+, -, *, /, ^, parentheses) and returns its value.",
  parameters: {
    type: "object",
    properties: { expression: { type: "string", description: "the expression, e.g. 4821 * 37" } },
    required: ["expression"],
    additionalProperties: false,
  },
} as const;

/** The calculator's answer, or the error the model reads. */
export function calculate(expression: string): string {
  try {
    return formatNumber(evaluate(expression));
  } catch (e) {
    if (e instanceof CalculatorError) return `Error: ${e.message}`;
    throw e;
  }
}

/** 1 when the reply's last number is the task's answer, else 0 (no answer to compare: no reward). */
export function rewardOf(reply: string, answer: string | undefined): number | null {
  if (answer === undefined) return null;
  const last = reply.match(/-?\d+(?:\.\d+)?/g)?.at(-1);
  return last !== undefined && Number(last) === Number(answer) ? 1 : 0;
}

/** Most model calls one episode makes before the agent gives up. */
export const MAX_STEPS = 6;
