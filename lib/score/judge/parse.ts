/**
 * Reading the judge's grades, strictly. Reasoning in `<think>…</think>` (an unclosed one runs to the end)
 * is removed first; then the answer must hold the grade tag exactly once:
 *
 * - pointwise: `<score>N</score>`;
 * - group: `<scores>g1, g2, …, gn</scores>` with exactly one grade per listed response, comma-separated.
 *
 * A grade is a plain non-negative decimal (`7`, `7.5`; no sign, exponent, fraction or unit) from 0 to
 * `max_score`; spaces around it are allowed. Anything else — no tag, two tags, an unclosed tag, a grade out
 * of range, the wrong count — is unparseable (`null`): the reward is then 0 with status
 * `judge_unparseable`, never a guess.
 *
 * @module
 */

const GRADE = /^\d+(?:\.\d+)?$/;

/** The answer without its reasoning blocks. */
function withoutThinking(answer: string): string {
  return answer.replace(/<think>[\s\S]*?(<\/think>|$)/g, "");
}

/** The one body of `<tag>…</tag>` in `text`, or null when there is none, more than one, or a stray opener. */
function onlyTag(text: string, tag: string): string | null {
  const opens = text.match(new RegExp(`<${tag}>`, "gi"))?.length ?? 0;
  const bodies = [...text.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, "gi"))];
  return opens === 1 && bodies.length === 1 ? bodies[0][1] : null;
}

function grade(text: string, max: number): number | null {
  const t = text.trim();
  if (!GRADE.test(t)) return null;
  const value = Number(t);
  return value <= max ? value : null;
}

/** The grade of a pointwise answer, or null when it does not follow the format. */
export function parsePointwise(answer: string, max: number): number | null {
  const body = onlyTag(withoutThinking(answer), "score");
  return body === null ? null : grade(body, max);
}

/** The `n` grades of a group answer, in listed order, or null when it does not follow the format. */
export function parseGroup(answer: string, n: number, max: number): number[] | null {
  const body = onlyTag(withoutThinking(answer), "scores");
  if (body === null) return null;
  const parts = body.split(",");
  if (parts.length !== n) return null;
  const grades = parts.map((p) => grade(p, max));
  return grades.some((g) => g === null) ? null : grades as number[];
}
