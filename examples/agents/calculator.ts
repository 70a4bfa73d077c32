/**
 * What the two example agents share: the demo's calculator task as a user's agent sees it — one tool it
 * runs itself (the gateway runs none), and the reward it judges from its final answer.
 *
 * @module
 */

import { CalculatorError, calculatorTool, evaluate, formatNumber } from "../../lib/tools/calculator.ts";

/**
 * The demo's system prompt (configs/demo.yaml `data.system_prompt`) and the rollout's calculator spec:
 * with them the agent's first prompt renders as the rollout stage's own for the same task, so a warm
 * start trained on the rollout's prompts carries over to the agent.
 */
export const SYSTEM_PROMPT = "Use the calculator. End with: Final answer: <answer>";

export const CALCULATOR = {
  name: calculatorTool.name,
  description: calculatorTool.description,
  parameters: calculatorTool.parameters,
};

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
