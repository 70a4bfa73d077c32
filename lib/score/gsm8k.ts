/**
 * `gsm8k`: 1 when the final answer equals the task's numeric answer, else 0.
 *
 * The answer is the number in the span after `####`, `\boxed{}`, "Final answer:" or "The answer is"
 * (answer.ts; when the span holds an equation, the part after its last `=`), else the last number of
 * the visible text. Numbers follow numbers.ts (commas, currency, units, trailing period, negatives,
 * fractions, decimals with a tolerance, Unicode digits such as "７" read after NFKC).
 *
 * A hedge is wrong: when the answer's first sentence after the marker holds two different numbers
 * ("7 or 8", "7 (but maybe 8)", "7 apples and 8 oranges", "7.0.0"), no one number is the answer, so
 * the first one is not credited. The same number repeated ("18, i.e. $18") is no hedge.
 *
 * Statuses: `correct`, `wrong` (a hedge included), `no_answer` (no number at all). A task without a numeric `answer` is
 * bad data and throws.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { findAnswer, visibleText } from "./answer.ts";
import { allNumbers, firstNumber, lastNumber, numbersMatch, type ParsedNumber } from "./numbers.ts";
import type { Episode, RewardFn, RewardResult } from "./types.ts";

/** What a final message answers: a number, a hedge between different numbers, or nothing. */
interface NumericAnswer {
  number?: ParsedNumber;
  hedge: boolean;
}

/** The number a model's final message answers with; undefined for no number or a hedge. */
export function extractNumericAnswer(content: string): ParsedNumber | undefined {
  return readAnswer(content).number;
}

function readAnswer(content: string): NumericAnswer {
  const visible = visibleText(content);
  const span = findAnswer(visible);
  if (span) {
    const eq = span.text.lastIndexOf("=");
    const numbers = allNumbers(firstSentence(eq >= 0 ? span.text.slice(eq + 1) : span.text));
    if (numbers.some((n) => n.value !== numbers[0].value)) return { hedge: true };
    if (numbers.length > 0) return { number: numbers[0], hedge: false };
  }
  return { number: lastNumber(visible), hedge: false };
}

/** Text up to the first sentence end (a `.`, `!` or `?` before a space or the end; `7.5` is one number). */
function firstSentence(text: string): string {
  const end = text.search(/[.!?](\s|$)/);
  return end < 0 ? text : text.slice(0, end + 1);
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
  const { number: pred, hedge } = readAnswer(content);
  if (hedge) return { value: 0, status: "wrong", correct: false };
  if (!pred) return { value: 0, status: "no_answer", correct: false };
  const ok = numbersMatch(pred, ref);
  return { value: ok ? 1 : 0, status: ok ? "correct" : "wrong", correct: ok };
}

export const gsm8k: RewardFn = {
  name: "gsm8k",
  doc: "1 when the final answer's number equals the task's answer",
  score: (episode) => scoreNumeric(episode.finalText, referenceNumber(episode, "gsm8k")),
};
