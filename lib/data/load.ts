/**
 * `loadTasks(data)`: the one entry point stages use. Dispatches on `data.source`, then applies the
 * seeded shuffle and `max_samples`.
 *
 * Order of operations: load every record (a bad one throws, even past `max_samples`), check that ids
 * are unique, shuffle with mulberry32(`shuffle_seed`) when a seed is set (see random.ts), then keep the
 * first `max_samples`. So a seed plus `max_samples` gives a random subset that is the same on every run;
 * no seed gives the first `max_samples` in file order.
 */
import { UserError } from "../errors.ts";
import { type ArithmeticOrder, generateArithmeticTasks } from "./arithmetic.ts";
import { type FieldMap, loadGeneric } from "./generic.ts";
import { loadGsm8k } from "./gsm8k.ts";
import { loadMbpp } from "./mbpp.ts";
import { checkPromptSize } from "./prompt_size.ts";
import { shuffled } from "./random.ts";
import type { Task } from "./task.ts";
import { DATA_SOURCES } from "../config/sections/model.ts";

/** The dataset kinds `data.source` can name (declared once, with the config schema). */
export { DATA_SOURCES };
export type DataSource = typeof DATA_SOURCES[number];

/** Synthetic arithmetic settings (`data.arithmetic`), snake_case as in config.yaml. */
export interface ArithmeticConfig {
  num_tasks: number;
  seed: number;
  min_operands: number;
  max_operands: number;
  max_value: number;
  order: ArithmeticOrder;
}

/** The `data` section of config.yaml, as far as loading is concerned (every key but `source` optional). */
export interface TaskDataOptions {
  /** Which loader reads `path` (or, for `arithmetic`, which generator runs). */
  source: DataSource;
  /** The dataset file; required for every source but `arithmetic`. */
  path?: string | null;
  /** Keep at most this many tasks (after the shuffle); null or absent keeps all. */
  max_samples?: number | null;
  /** Seed of the shuffle; null or absent keeps file order. */
  shuffle_seed?: number | null;
  /** Field mapping for `jsonl` and `parquet` sources. */
  fields?: FieldMap | null;
  /** Generator settings for `arithmetic`; missing keys take `ARITHMETIC_DEFAULTS`. */
  arithmetic?: Partial<ArithmeticConfig> | null;
  /** The system message before every task; only its size is checked here (`checkPromptSizes`). */
  system_prompt?: string | null;
}

/** Defaults of the synthetic arithmetic task. */
export const ARITHMETIC_DEFAULTS: ArithmeticConfig = {
  num_tasks: 200,
  seed: 0,
  min_operands: 2,
  max_operands: 4,
  max_value: 9999,
  order: "precedence",
};

/** Loads the tasks `data` describes, shuffled and truncated as it says. */
export async function loadTasks(data: TaskDataOptions): Promise<Task[]> {
  const all = await loadSource(data);
  checkPromptSizes(all, data);
  checkUniqueIds(all, data);
  return selectTasks(all, data);
}

/** Applies the seeded shuffle, then `max_samples` (exported for callers that hold tasks already). */
export function selectTasks(
  tasks: readonly Task[],
  data: Pick<TaskDataOptions, "max_samples" | "shuffle_seed">,
): Task[] {
  const ordered = data.shuffle_seed === null || data.shuffle_seed === undefined
    ? tasks.slice()
    : shuffled(tasks, data.shuffle_seed);
  return data.max_samples === null || data.max_samples === undefined
    ? ordered
    : ordered.slice(0, data.max_samples);
}

function loadSource(data: TaskDataOptions): Promise<Task[]> {
  switch (data.source) {
    case "gsm8k":
      return loadGsm8k(requirePath(data));
    case "mbpp":
      return loadMbpp(requirePath(data), { variant: "full" });
    case "mbpp_sanitized":
      return loadMbpp(requirePath(data), { variant: "sanitized" });
    case "jsonl":
    case "parquet":
      return loadGeneric(requirePath(data, data.source), { fields: requireFields(data) });
    case "arithmetic":
      return Promise.resolve(arithmeticTasks(data.arithmetic ?? {}));
    default:
      throw new UserError("data.source", {
        value: data.source,
        why: `it is not a known dataset kind`,
        fix: `use one of ${DATA_SOURCES.join(", ")}`,
      });
  }
}

function arithmeticTasks(partial: Partial<ArithmeticConfig>): Task[] {
  const c = { ...ARITHMETIC_DEFAULTS, ...partial };
  return generateArithmeticTasks({
    numTasks: c.num_tasks,
    seed: c.seed,
    minOperands: c.min_operands,
    maxOperands: c.max_operands,
    maxValue: c.max_value,
    order: c.order,
  });
}

const EXTENSIONS: Record<"jsonl" | "parquet", RegExp> = { jsonl: /\.jsonl?$/i, parquet: /\.parquet$/i };

/** `data.path`, which must be set; for `jsonl` / `parquet` sources its extension must match. */
function requirePath(data: TaskDataOptions, format?: "jsonl" | "parquet"): string {
  if (!data.path) {
    throw new UserError("data.path", {
      value: data.path ?? null,
      why: `source "${data.source}" reads a file and no path is set`,
      fix: "set data.path to a .jsonl or .parquet file (e.g. --data.path=data/gsm8k_sample.jsonl)",
    });
  }
  if (format && !EXTENSIONS[format].test(data.path)) {
    throw new UserError("data.path", {
      value: data.path,
      why: `source "${format}" expects a ${format === "jsonl" ? ".jsonl or .json" : ".parquet"} file`,
      fix: "set data.source to match the file (jsonl or parquet)",
    });
  }
  return data.path;
}

function requireFields(data: TaskDataOptions): FieldMap {
  if (data.fields && typeof data.fields.prompt === "string" && data.fields.prompt !== "") return data.fields;
  throw new UserError("data.fields.prompt", {
    value: data.fields?.prompt ?? null,
    why: `source "${data.source}" needs to know which field holds the prompt`,
    fix: "set data.fields.prompt (and optionally data.fields.id, data.fields.answer) to field names",
  });
}

/** Every prompt within `PROMPT_MAX_BYTES`, before a tokenizer sees one (a 50 MB prompt crashed Deno). */
function checkPromptSizes(tasks: Task[], data: TaskDataOptions): void {
  if (data.system_prompt) {
    checkPromptSize("data.system_prompt", data.system_prompt, "shorten data.system_prompt");
  }
  for (const task of tasks) {
    checkPromptSize(
      `${data.path ?? data.source}: task ${JSON.stringify(task.id)}: prompt`,
      task.prompt,
      "shorten the task's prompt or leave the task out of the dataset",
    );
  }
}

/** Two tasks with one id would be scored and grouped together; refuse that. */
function checkUniqueIds(tasks: Task[], data: TaskDataOptions): void {
  const seen = new Set<string>();
  for (const task of tasks) {
    if (!seen.has(task.id)) {
      seen.add(task.id);
      continue;
    }
    throw new UserError(`${data.path ?? data.source}: task id`, {
      value: task.id,
      why: "two records have the same id",
      fix: "make the id field unique, or unset data.fields.id to number the records",
    });
  }
}
