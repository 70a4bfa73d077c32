/**
 * Datasets: the `Task` shape, loaders for GSM8K, MBPP and generic JSON Lines / Parquet files, the
 * synthetic arithmetic generator, and `loadTasks` for the `data` section of config.yaml.
 *
 * @example
 * ```ts
 * import { loadTasks } from "./mod.ts";
 * const tasks = await loadTasks({ source: "gsm8k", path: "data/gsm8k_sample.jsonl", max_samples: 8, shuffle_seed: 1 });
 * ```
 */
export type { Task, TaskSource } from "./task.ts";
export { extractGsm8kAnswer, loadGsm8k } from "./gsm8k.ts";
export { loadMbpp, type MbppOptions, mbppPrompt, type MbppVariant } from "./mbpp.ts";
export { type FieldMap, type GenericOptions, loadGeneric } from "./generic.ts";
export { type ArithmeticOptions, generateArithmeticTasks } from "./arithmetic.ts";
export {
  ARITHMETIC_DEFAULTS,
  type ArithmeticConfig,
  DATA_SOURCES,
  type DataSource,
  loadTasks,
  selectTasks,
  type TaskDataOptions,
} from "./load.ts";
export { readRows, type Row } from "./rows.ts";
export { mulberry32, shuffled } from "./random.ts";
