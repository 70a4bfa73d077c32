/** Schema of the `model` and `data` sections (see schema.ts). */
import { EXECUTION_PROVIDERS } from "../../ort/providers.ts";
import { COMPUTE_DTYPES } from "../../model/graph/forms.ts";
import { bool, choice, int, str } from "../fields.ts";

/** How an arithmetic expression is written and evaluated (lib/data/arithmetic.ts). */
export const ARITHMETIC_ORDERS = ["precedence", "left_to_right"] as const;
export type ArithmeticOrder = typeof ARITHMETIC_ORDERS[number];

export const DATA_SOURCES = ["gsm8k", "mbpp", "mbpp_sanitized", "arithmetic", "jsonl", "parquet"] as const;

export const model = {
  path: str({
    default: "runs/demo/model",
    doc: "Qwen3 model directory in Hugging Face layout (config.json, safetensors, tokenizer)",
  }),
  ep: choice({
    choices: EXECUTION_PROVIDERS,
    default: "cpu",
    doc:
      "onnxruntime execution provider (cuda only where its runtime is installed; `deno task doctor` lists them)",
  }),
  compute_dtype: choice({
    choices: COMPUTE_DTYPES,
    default: "float32",
    doc: "weights and activations on a GPU provider (float16 halves memory; log-probs and loss stay float32)",
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
  shared_weights: bool({
    default: true,
    doc: "one float32 copy of the weights per process, shared by the engine and the trainer (cpu)",
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
    doc: "dataset file (.jsonl or .parquet); required for every source but arithmetic",
  }),
  max_samples: int({
    default: null,
    min: 1,
    nullable: true,
    doc: "keep at most this many tasks (after the shuffle); null = all",
  }),
  shuffle_seed: int({
    default: 0,
    min: 0,
    nullable: true,
    doc: "seed for shuffling the tasks; null = keep file order",
  }),
  fields: {
    id: str({
      default: null,
      nullable: true,
      doc: "field holding a unique task id (jsonl/parquet); null = file name and row number",
    }),
    prompt: str({ default: "prompt", doc: "field holding the user message (jsonl/parquet)" }),
    answer: str({
      default: "answer",
      nullable: true,
      doc: "field holding the reference final answer (jsonl/parquet); null = none",
    }),
  },
  system_prompt: str({
    default:
      "You are a careful assistant. Use the tools when they help. End your reply with: Final answer: <answer>",
    nullable: true,
    allowEmpty: true,
    doc: "system message before every task; null = none (the chat template still adds the tool list)",
  }),
  arithmetic: {
    num_tasks: int({ default: 200, min: 1, max: 1_000_000, doc: "how many synthetic tasks to generate" }),
    seed: int({ default: 0, min: 0, doc: "generator seed (the same seed gives the same tasks)" }),
    min_operands: int({ default: 2, min: 2, max: 16, doc: "fewest operands in one expression" }),
    max_operands: int({
      default: 4,
      min: 2,
      max: 16,
      doc: "most operands in one expression (+, -, *, / with exact results)",
    }),
    max_value: int({
      default: 9999,
      min: 2,
      max: 1_000_000,
      doc: "largest operand (operands are integers from 1; large enough that the calculator pays off)",
    }),
    order: choice({
      choices: ARITHMETIC_ORDERS,
      default: "precedence",
      doc: "precedence (* and / first) | left_to_right (parenthesized: (a op b) op c, one step at a time)",
    }),
  },
};
