/**
 * MBPP (`google-research-datasets/mbpp` on Hugging Face), in both of its configurations:
 * - `full`: `task_id`, `text` (the description), `code`, `test_list`, `test_setup_code`
 *   (`challenge_test_list` is kept in `meta` when present);
 * - `sanitized`: `task_id`, `prompt` (the description), `code`, `test_list`, `test_imports`
 *   (`source_file` is kept in `meta` when present).
 *
 * The prompt is the description plus the first test, so the policy knows the function's name and
 * signature (see task.ts). Ids are `mbpp-{task_id}`.
 */
import {
  optionalStringField,
  optionalStringListField,
  scalarField,
  stringField,
  stringListField,
} from "./fields.ts";
import { readRows, type Row } from "./rows.ts";
import type { Task } from "./task.ts";
import { UserError } from "../errors.ts";

/** Which of MBPP's two configurations a file holds. */
export type MbppVariant = "full" | "sanitized";

/** Options for `loadMbpp`. */
export interface MbppOptions {
  /** `full` (default) or `sanitized`; they name the description and the setup fields differently. */
  variant?: MbppVariant;
}

/** Loads an MBPP JSON Lines or Parquet file. Throws a `UserError` naming file and row on a bad record. */
export async function loadMbpp(path: string, options: MbppOptions = {}): Promise<Task[]> {
  const variant = options.variant ?? "full";
  const rows = await readRows(path);
  return rows.map((row) => variant === "full" ? mbppFullTask(row) : mbppSanitizedTask(row));
}

/** The prompt shown to the policy: the description, then the first test. */
export function mbppPrompt(description: string, tests: string[]): string {
  return `${description.trim()}\nYour code should pass this test:\n${tests[0]}`;
}

/** One record of MBPP `full` → a task. */
export function mbppFullTask(row: Row): Task {
  const tests = testList(row);
  const challenge = optionalStringListField(row, "challenge_test_list");
  return {
    id: `mbpp-${scalarField(row, "task_id")}`,
    source: "mbpp",
    prompt: mbppPrompt(stringField(row, "text"), tests),
    tests,
    setup_code: optionalStringField(row, "test_setup_code") ?? "",
    reference_code: stringField(row, "code"),
    meta: challenge.length > 0 ? { challenge_test_list: challenge } : {},
  };
}

/** One record of MBPP `sanitized` → a task. */
export function mbppSanitizedTask(row: Row): Task {
  const tests = testList(row);
  const sourceFile = optionalStringField(row, "source_file");
  return {
    id: `mbpp-${scalarField(row, "task_id")}`,
    source: "mbpp",
    prompt: mbppPrompt(stringField(row, "prompt"), tests),
    tests,
    test_imports: optionalStringListField(row, "test_imports"),
    reference_code: stringField(row, "code"),
    meta: sourceFile === undefined ? {} : { source_file: sourceFile },
  };
}

/** `test_list`, which must hold at least one assert (the prompt shows the first). */
function testList(row: Row): string[] {
  const tests = stringListField(row, "test_list");
  if (tests.length > 0) return tests;
  throw new UserError(`${row.where}: field "test_list"`, {
    value: tests,
    why: "it is empty, so the task cannot be scored",
    fix: "give the task at least one assert line",
  });
}
