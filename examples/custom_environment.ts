/**
 * A custom environment: a number-guessing game. The model guesses; the environment answers "higher" or
 * "lower" as the next user message, and ends the episode when the guess is right. Tool calls still go to
 * the built-in tool environment (so the calculator works inside the game).
 *
 *   rollout:
 *     environment:
 *       kind: module
 *       module: examples/custom_environment.ts
 *
 * A task's `answer` is the secret number. See docs/environments.md.
 */
import type { Task } from "../lib/data/task.ts";
import type { AssistantTurn, Environment, EnvironmentContext, EnvStep } from "../lib/rollout/environment.ts";

export function createEnvironment(task: Task, context: EnvironmentContext): Environment {
  const secret = Number(task.answer);
  return {
    reset: () => [
      ...(context.systemPrompt ? [{ role: "system" as const, content: context.systemPrompt }] : []),
      { role: "user", content: `${task.prompt}\nGuess the number; answer with the number only.` },
    ],
    async step(turn: AssistantTurn): Promise<EnvStep> {
      const viaTools = await context.tools.step(turn);
      if (viaTools.toolCalls?.length) return viaTools; // the model used a tool: feed its results back
      const guess = Number((turn.text.match(/-?\d+/g) ?? []).at(-1));
      if (guess === secret) return { messages: [], done: true, reason: "env_done" };
      const hint = Number.isNaN(guess)
        ? "Please answer with a number."
        : guess < secret
        ? "Higher."
        : "Lower.";
      return { messages: [{ role: "user", content: hint }], done: false };
    },
  };
}
