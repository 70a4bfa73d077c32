/** The gsm8k answer extractor on hand-written answer formats, and the numeric tolerance. */
import assert from "node:assert/strict";
import { extractNumericAnswer, scoreNumeric } from "../../lib/score/gsm8k.ts";
import { numbersMatch } from "../../lib/score/numbers.ts";
import { exactMatch } from "../../lib/score/exact_match.ts";
import type { Episode } from "../../lib/score/types.ts";

/** [model's final message, reference answer, expected status]. */
const CASES: Array<[string, number, "correct" | "wrong" | "no_answer"]> = [
  ["#### 42", 42, "correct"],
  ["The total is 6 + 7 = 13.\n#### 13", 13, "correct"],
  ["#### 1,234", 1234, "correct"],
  ["#### $1,234.00", 1234, "correct"],
  ["#### 18 dollars", 18, "correct"],
  ["#### -7", -7, "correct"],
  ["#### \u22127", -7, "correct"],
  ["#### 42.", 42, "correct"],
  ["#### 3/4", 0.75, "correct"],
  ["#### 0.75", 0.75, "correct"],
  ["#### 1 1/2", 1.5, "correct"],
  ["#### 50%", 50, "correct"],
  ["#### 12 cm", 12, "correct"],
  ["#### 5\nThanks for the question!", 5, "correct"],
  ["First 10, then #### 20", 20, "correct"],
  ["#### 43", 42, "wrong"],
  ["\\boxed{42}", 42, "correct"],
  ["So the answer is $\\boxed{1,000}$.", 1000, "correct"],
  ["\\boxed{\\frac{3}{4}}", 0.75, "correct"],
  ["\\boxed{\\dfrac{1}{3}}", 1 / 3, "correct"],
  ["\\boxed{1{,}000}", 1000, "correct"],
  ["\\boxed{12{,}345{,}678}", 12345678, "correct"],
  ["\\boxed{1\\,000}", 1000, "correct"],
  ["\\boxed{2\\frac{1}{2}}", 2.5, "correct"],
  ["\\boxed{-2\\frac{1}{2}}", -2.5, "correct"],
  ["\\boxed{-2.5}", -2.5, "correct"],
  ["\\boxed{\\$18}", 18, "correct"],
  ["\\boxed{18 \\text{ apples}}", 18, "correct"],
  ["\\boxed{x = 9}", 9, "correct"],
  ["Final answer: 17", 17, "correct"],
  ["final answer: 17 apples.", 17, "correct"],
  ["Final Answer: $2,500", 2500, "correct"],
  ["The final answer is 8.", 8, "correct"],
  ["Final answer: 3 + 4 = 7", 7, "correct"],
  ["The answer is 64.", 64, "correct"],
  ["I think the answer is 12 because 3*4=12.", 12, "correct"],
  ["She has 3 apples and buys 4 more, so 7 apples.", 7, "correct"],
  ["So she pays $15.50.", 15.5, "correct"],
  ["It takes 2.5 hours.", 2.5, "correct"],
  ["The result is 1e3", 1000, "correct"],
  ["The ratio is 0.33", 1 / 3, "correct"],
  ["The ratio is 0.3", 1 / 3, "wrong"],
  ["Roughly 3.14", 3.14159, "correct"],
  ["There are .5 liters left", 0.5, "correct"],
  ["<think>Maybe 41? No, 6*7 = 42.</think>\n#### 42", 42, "correct"],
  ["<think>The answer is 42</think>\nI don't know.", 42, "no_answer"],
  ["<think>long reasoning that never ends 42", 42, "no_answer"],
  ['<tool_call>\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n</tool_call>', 42, "no_answer"],
  ["I cannot solve this.", 42, "no_answer"],
  ["", 42, "no_answer"],
  ["#### 1,000,000", 1e6, "correct"],
  ["#### 007", 7, "correct"],
  ["#### (5)", 5, "correct"],
];

Deno.test(`gsm8k scores ${CASES.length} hand-written answer formats`, () => {
  assert.ok(CASES.length >= 40);
  const failures = CASES.filter(([text, ref, want]) => scoreNumeric(text, ref).status !== want)
    .map(([text, ref, want]) =>
      `${JSON.stringify(text)} vs ${ref}: want ${want}, got ${scoreNumeric(text, ref).status} ` +
      `(${extractNumericAnswer(text)?.value})`
    );
  assert.deepEqual(failures, []);
});

Deno.test("a correct answer scores 1 and says correct; a wrong one 0", () => {
  assert.deepEqual(scoreNumeric("#### 42", 42), { value: 1, status: "correct", correct: true });
  assert.deepEqual(scoreNumeric("#### 41", 42), { value: 0, status: "wrong", correct: false });
});

Deno.test("the tolerance accepts float noise and rounding to two or more decimals, not coarser", () => {
  assert.ok(numbersMatch({ value: 0.1 + 0.2, decimals: 17 }, 0.3));
  assert.ok(numbersMatch({ value: 0.67, decimals: 2 }, 2 / 3));
  assert.ok(!numbersMatch({ value: 0.7, decimals: 1 }, 2 / 3));
  assert.ok(!numbersMatch({ value: 42.001, decimals: 3 }, 42));
});

/** A hedge after the final marker names two different numbers: no one of them is the answer (issue 32). */
const HEDGES = [
  "Final answer: 7 or 8",
  "Final answer: 7 (but maybe 8)",
  "Final answer: 7 apples and 8 oranges",
  "Final answer: 7.0.0",
  "#### 7 or 8",
  "\\boxed{7, 8}",
  "The answer is 7 or maybe 8.",
];

Deno.test("a hedge (two different numbers after the final marker) is wrong; a repeated number is not a hedge", () => {
  for (const text of HEDGES) {
    assert.deepEqual(scoreNumeric(text, 7), { value: 0, status: "wrong", correct: false }, text);
  }
  for (const text of ["Final answer: 7 (seven, i.e. 7)", "The answer is 7. Step 2 was the hard part."]) {
    assert.equal(scoreNumeric(text, 7).status, "correct", text);
  }
});

Deno.test("Unicode digits are read after NFKC, as exact_match reads them: a full-width ７ is 7", async () => {
  for (const text of ["Final answer: \uff17", "#### \uff11\uff12", "\\boxed{\uff14\uff12}"]) {
    const ref = Number(text.normalize("NFKC").match(/\d+/)![0]);
    assert.equal(scoreNumeric(text, ref).status, "correct", text);
    const exact = await exactMatch.score(episodeWith(text, String(ref)), {} as never);
    assert.equal(exact.value, 1, `exact_match ${text}`);
  }
});

/** An episode of a one-line final message, for rewards that read only the text and the task's answer. */
function episodeWith(finalText: string, answer: string): Episode {
  return { finalText, task: { answer } } as unknown as Episode;
}
