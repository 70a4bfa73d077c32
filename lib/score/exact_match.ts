/**
 * `exact_match`: 1 when the normalized final answer equals the normalized reference, else 0.
 *
 * The answer is the span after a marker (answer.ts), else the whole visible text. Normalization (as
 * SQuAD's evaluation does it): Unicode NFKC, lower case, punctuation removed, the articles a / an /
 * the removed, whitespace collapsed. Statuses: `correct`, `wrong`, `no_answer` (nothing visible).
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { findAnswer, visibleText } from "./answer.ts";
import type { RewardFn } from "./types.ts";

/** SQuAD-style normalization. */
export function normalizeAnswer(text: string): string {
  return text
    .normalize("NFKC")
    .toLowerCase()
    .replace(/[\p{P}\p{S}]/gu, " ")
    .replace(/\b(a|an|the)\b/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

export const exactMatch: RewardFn = {
  name: "exact_match",
  doc: "1 when the normalized final answer equals the normalized reference",
  score(episode) {
    const reference = episode.task?.answer;
    if (reference === undefined || normalizeAnswer(String(reference)) === "") {
      throw new UserError(`reward exact_match: task ${episode.task?.id} (episode ${episode.episodeId})`, {
        value: reference ?? null,
        why: "the task has no answer to compare with",
        fix: "give every task an answer, or remove exact_match from score.rewards",
      });
    }
    const visible = visibleText(episode.finalText);
    const answer = normalizeAnswer(findAnswer(visible)?.text ?? visible);
    if (!answer) return { value: 0, status: "no_answer", correct: false };
    const ok = answer === normalizeAnswer(String(reference));
    return { value: ok ? 1 : 0, status: ok ? "correct" : "wrong", correct: ok };
  },
};
