/**
 * `gsm8k`: 1 when the final answer equals the task's numeric answer, else 0.
 *
 * The answer is the number in the span after `####`, `\boxed{}`, "Final answer:" or "The answer is"
 * (answer.ts; when the span holds an equation, the part after its last `=`), else the last number of
 * the visible text. Numbers follow numbers.ts (commas, currency, units, trailing period, negatives,
 * fractions, decimals with a tolerance).
 *
 * Statuses: `correct`, `wrong`, `no_answer` (no number at all). A task without a numeric `answer` is
 * bad data and throws.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { findAnswer, visibleText } from "./answer.ts";
import { firstNumber, lastNumber, numbersMatch, type ParsedNumber } from "./numbers.ts";
import type { Episode, RewardFn, RewardResult } from "./types.ts";

/** The number a model's final message answers with, or undefined. */
export function extractNumericAnswer(content: string): ParsedNumber | undefined {
  const visible = visibleText(content);
  const span = findAnswer(visible);
  if (span) {
    const eq = span.text.lastIndexOf("=");
    const found = firstNumber(eq >= 0 ? span.text.slice(eq + 1) : span.text);
    if (found) return found;
  }
  return lastNumber(visible);
}

/** The task's reference answer as a number; bad data throws. */
export function referenceNumber(episode: Episode, reward: string): number {
  const answer = episode.task?.answer;
  const parsed = answer === undefined ? undefined : firstNumber(String(answer));
  if (!parsed) {
    throw new UserError(`reward ${reward}: task ${episode.task?.id} (episode ${episode.episodeId})`, {
      value: answer ?? null,
      why: "the task has no numeric answer to compare with",
      fix: `give every task a numeric answer, or remove ${reward} from score.rewards`,
    });
  }
  return parsed.value;
}

/** Scores one final message against a numeric reference. */
export function scoreNumeric(content: string, ref: number): RewardResult {
  const pred = extractNumericAnswer(content);
  if (!pred) return { value: 0, status: "no_answer", correct: false };
  const ok = numbersMatch(pred, ref);
  return { value: ok ? 1 : 0, status: ok ? "correct" : "wrong", correct: ok };
}

export const gsm8k: RewardFn = {
  name: "gsm8k",
  doc: "1 when the final answer's number equals the task's answer",
  score: (episode) => scoreNumeric(episode.finalText, referenceNumber(episode, "gsm8k")),
};
