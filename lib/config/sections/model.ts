/** Schema of the `model` and `data` sections (see schema.ts). */
import { choice, int, str, subset } from "../fields.ts";
export const EXECUTION_PROVIDERS = ["cpu", "webgpu", "cuda"] as const;
export const DATA_SOURCES = ["gsm8k", "mbpp", "mbpp_sanitized", "arithmetic", "jsonl", "parquet"] as const;
export const ARITHMETIC_OPERATORS = ["add", "sub", "mul", "div"] as const;

export const model = {
  path: str({
    default: "runs/demo/model",
    doc: "Qwen3 model directory in Hugging Face layout (config.json, safetensors, tokenizer)",
  }),
  ep: choice({
    choices: EXECUTION_PROVIDERS,
    default: "cpu",
    doc: "onnxruntime execution provider (cuda only where its runtime is installed)",
  }),
  threads: int({
    default: 0,
    min: 0,
    max: 1024,
    doc: "CPU threads for onnxruntime; 0 = let onnxruntime choose",
  }),
  adapter: str({
    default: null,
    nullable: true,
    doc: "PEFT LoRA adapter directory to start from; null = fresh adapter",
  }),
};

export const data = {
  source: choice({
    choices: DATA_SOURCES,
    default: "arithmetic",
    doc: "task set: a known dataset format, the synthetic calculator tasks, or a generic file",
  }),
  path: str({
    default: null,
    nullable: true,
    doc:
      "task file (.jsonl or .parquet); null = the sample set in data/ (gsm8k, mbpp) or generated (arithmetic)",
  }),
  max_samples: int({ default: 0, min: 0, doc: "use at most this many tasks; 0 = all" }),
  shuffle_seed: int({
    default: 0,
    min: 0,
    nullable: true,
    doc: "seed for shuffling the tasks; null = keep file order",
  }),
  fields: {
    id: str({
      default: "id",
      nullable: true,
      doc: "column holding the task id (jsonl/parquet); null = row number",
    }),
    prompt: str({ default: "prompt", doc: "column holding the user prompt (jsonl/parquet)" }),
    answer: str({ default: "answer", doc: "column holding the reference answer (jsonl/parquet)" }),
  },
  system_prompt: str({
    default:
      "You are a careful assistant. Use the tools when they help. End your reply with: Final answer: <answer>",
    nullable: true,
    allowEmpty: true,
    doc: "system message before every task; null = none (the chat template still adds the tool list)",
  }),
  arithmetic: {
    num_tasks: int({ default: 256, min: 1, max: 1_000_000, doc: "how many synthetic tasks to generate" }),
    seed: int({ default: 0, min: 0, doc: "generator seed (the same seed gives the same tasks)" }),
    min_operands: int({ default: 2, min: 2, max: 16, doc: "fewest numbers in one expression" }),
    max_operands: int({ default: 3, min: 2, max: 16, doc: "most numbers in one expression" }),
    min_value: int({ default: 10, min: 0, doc: "smallest operand" }),
    max_value: int({
      default: 9999,
      min: 1,
      max: 1e12,
      doc: "largest operand (large enough that the calculator pays off)",
    }),
    operators: subset({
      choices: ARITHMETIC_OPERATORS,
      default: ["add", "sub", "mul"],
      minItems: 1,
      doc: "operators to draw from (div gives exact quotients only)",
    }),
  },
};
