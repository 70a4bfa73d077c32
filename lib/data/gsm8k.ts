/**
 * GSM8K (`openai/gsm8k` on Hugging Face): records with `question` and `answer`, where `answer` is a
 * worked solution whose last line is `#### N`.
 *
 * The task's `answer` is N with thousands separators removed (`1,234` → `1234`), sign and decimals
 * kept. The worked solution before `####` is kept as `meta.solution` (for SFT warm starts). Ids are
 * `gsm8k-{row}` with the row counted from 0 in the file.
 */
import { UserError } from "../errors.ts";
import { stringField } from "./fields.ts";
import { readRows, type Row } from "./rows.ts";
import type { Task } from "./task.ts";

/** Loads a GSM8K JSON Lines or Parquet file. Throws a `UserError` naming file and row on a bad record. */
export async function loadGsm8k(path: string): Promise<Task[]> {
  return (await readRows(path)).map(gsm8kTask);
}

/** One GSM8K record → a task. */
export function gsm8kTask(row: Row): Task {
  const question = stringField(row, "question");
  const full = stringField(row, "answer");
  const { solution, answer } = splitAnswer(row, full);
  return { id: `gsm8k-${row.index}`, source: "gsm8k", prompt: question, answer, meta: { solution } };
}

const NUMBER = /^[-+]?\d+(\.\d+)?$/;

/** Splits `"...reasoning...\n#### 1,234"` into the reasoning and `"1234"`. */
function splitAnswer(row: Row, full: string): { solution: string; answer: string } {
  const at = full.lastIndexOf("####");
  if (at < 0) {
    throw new UserError(`${row.where}: field "answer"`, {
      value: full,
      why: 'it has no "#### N" final-answer marker',
      fix: 'end the answer with a line "#### N" (N the final number), as GSM8K does',
    });
  }
  const raw = full.slice(at + 4).trim();
  const answer = raw.replaceAll(",", "").replace(/^\+/, "");
  if (!NUMBER.test(answer)) {
    throw new UserError(`${row.where}: field "answer"`, {
      value: raw,
      why: 'the text after "####" is not a number',
      fix: 'write a plain number after "####" (digits, optional sign and decimals, commas allowed)',
    });
  }
  return { solution: full.slice(0, at).trim(), answer };
}

/** Extracts the final answer of a GSM8K solution text, or `undefined` when it has no valid `#### N`. */
export function extractGsm8kAnswer(text: string): string | undefined {
  try {
    return splitAnswer({ values: {}, index: 0, where: "" }, text).answer;
  } catch (err) {
    if (err instanceof UserError) return undefined;
    throw err;
  }
}
