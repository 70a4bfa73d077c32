/**
 * The one task shape every loader returns and every stage reads (it travels as the `task` JSON column
 * of `rollouts.arrow`).
 *
 * Prompt building (a choice, written down here once):
 * - GSM8K and generic tasks: the prompt is the question text as given, nothing added. How to answer
 *   (tools, the `####` convention, a system prompt) is the rollout's business, not the dataset's.
 * - MBPP: the description alone does not say what the function must be called, so the prompt adds the
 *   first test assert, as is common practice (the MBPP paper and most evaluation harnesses show tests
 *   in the prompt): `"{text}\nYour code should pass this test:\n{test_list[0]}"`. All tests, the shown
 *   one included, stay in `tests` for scoring.
 * - Arithmetic: `"Compute {expression}. Use the calculator tool."` (see arithmetic.ts).
 */

/** Where a task came from; `generic` covers any JSONL / Parquet file read with a field mapping. */
export type TaskSource = "gsm8k" | "mbpp" | "arithmetic" | "generic";

/** One problem for the policy to solve, with what the scorer needs to check it. */
export interface Task {
  /** Unique within a dataset; stable across runs (derived from the file's row, never from a shuffle). */
  id: string;
  source: TaskSource;
  /** The user message. */
  prompt: string;
  /** Canonical final answer (`"42"`, `"-3.5"`), for exact or numeric match. */
  answer?: string;
  /** Python assert lines; the code passes when every one runs without error. */
  tests?: string[];
  /** Python run before the tests (MBPP full `test_setup_code`). */
  setup_code?: string;
  /** Import lines run before the tests (MBPP sanitized `test_imports`). */
  test_imports?: string[];
  /** A known-good solution (MBPP `code`), for checks and SFT warm starts; never shown to the policy. */
  reference_code?: string;
  /** Anything else worth keeping (the worked GSM8K solution, the arithmetic expression...). */
  meta?: Record<string, unknown>;
}
