/** Schema of the `model` and `data` sections (see schema.ts). */
import { EXECUTION_PROVIDERS, type ExecutionProvider, type ProviderOptions } from "../../ort/providers.ts";
import {
  ORT_WEBGPU_DEFAULTS,
  WEBGPU_BUFFER_CACHE_MODES,
  WEBGPU_VALIDATION_MODES,
  type WebGpuOptions,
} from "../../ort/webgpu_options.ts";
import { COMPUTE_DTYPES } from "../../model/graph/forms.ts";
import { bool, choice, type Infer, int, str } from "../fields.ts";

/** How an arithmetic expression is written and evaluated (lib/data/arithmetic.ts). */
export const ARITHMETIC_ORDERS = ["precedence", "left_to_right"] as const;
export type ArithmeticOrder = typeof ARITHMETIC_ORDERS[number];

/** `model.merge_adapter`: auto (by provider), or forced on or off (YAML's true / false are accepted). */
export const MERGE_ADAPTER_SETTINGS = ["auto", "true", "false"] as const;
export type MergeAdapterSetting = typeof MERGE_ADAPTER_SETTINGS[number];

export const DATA_SOURCES = ["gsm8k", "mbpp", "mbpp_sanitized", "arithmetic", "jsonl", "parquet"] as const;

/**
 * The defaults of `model.webgpu`, by onnxruntime option, chosen by measurement (BENCH.md, 2026-11-27, an
 * NVIDIA H200 through its Vulkan driver, Qwen3-0.6B's shape, float16): storageBufferCacheMode simple with
 * validationMode disabled took the 8,192-token LoRA train step from 7.66 s to 4.15 s (1.84×) and the
 * 4,096-token one from 2.79 s to 1.70 s; decode moved by 1–4%. Which of the two gives what was not
 * separated. `simple` keeps a freed buffer for reuse at its exact size until the session closes: memory can
 * grow with the number of distinct shapes a run meets (on lavapipe, over 40 prefills of 20–400 tokens it
 * grew ~1 MB a call where `bucket` stayed within 9 MB: bench/webgpu_cache_memory.ts); set storage_buffer_cache_mode back to bucket if a long
 * run's GPU memory climbs. Everything else is onnxruntime's own (`ORT_WEBGPU_DEFAULTS`). To change one,
 * change it here and in config.yaml (which must hold the schema's defaults: tests/config/load_test.ts).
 */
export const WEBGPU_DEFAULTS: Readonly<WebGpuOptions> = {
  ...ORT_WEBGPU_DEFAULTS,
  storageBufferCacheMode: "simple",
  validationMode: "disabled",
};

/** Each `model.webgpu` key and the WebGPU provider option it sets (lib/ort/webgpu_options.ts). */
export const WEBGPU_OPTION_NAMES = {
  storage_buffer_cache_mode: "storageBufferCacheMode",
  uniform_buffer_cache_mode: "uniformBufferCacheMode",
  query_resolve_buffer_cache_mode: "queryResolveBufferCacheMode",
  default_buffer_cache_mode: "defaultBufferCacheMode",
  validation_mode: "validationMode",
} as const satisfies Record<string, keyof WebGpuOptions>;

/** A buffer cache mode key, defaulting to `WEBGPU_DEFAULTS[option]`. */
function cacheMode(option: Exclude<keyof WebGpuOptions, "validationMode">, what: string) {
  return choice({
    choices: WEBGPU_BUFFER_CACHE_MODES,
    default: WEBGPU_DEFAULTS[option],
    doc: `how the WebGPU provider keeps freed ${what} for reuse (onnxruntime's ${option})`,
  });
}

/**
 * onnxruntime's WebGPU provider options (model.ep webgpu), values as onnxruntime spells them. The buffer
 * cache modes: disabled (free at once), lazyRelease (free after the run), simple (reuse a buffer of the
 * same size), bucket (round sizes up to buckets and reuse). One set per process: every session gets these.
 */
const webgpu = {
  storage_buffer_cache_mode: cacheMode("storageBufferCacheMode", "storage buffers (every tensor's memory)"),
  uniform_buffer_cache_mode: cacheMode("uniformBufferCacheMode", "uniform buffers (each dispatch's shapes)"),
  query_resolve_buffer_cache_mode: cacheMode("queryResolveBufferCacheMode", "query buffers (profiling)"),
  default_buffer_cache_mode: cacheMode("defaultBufferCacheMode", "other buffers (copies to the host)"),
  validation_mode: choice({
    choices: WEBGPU_VALIDATION_MODES,
    default: WEBGPU_DEFAULTS.validationMode,
    doc: "checks on each GPU dispatch: disabled | wgpuOnly (WebGPU's own) | basic (plus onnxruntime's) | " +
      "full (plus types) (onnxruntime's validationMode)",
  }),
  decode_graph: bool({
    default: true,
    doc: "run the policy's plain one-token decode steps (no constraints, alternatives or top-k/top-p) on " +
      "the decode graph, which has no If, in a second session (lib/engine/decode_session.ts); it shares the " +
      "merged adapter's Linears with the first and holds its own copy of the rest of the weights (with no " +
      "adapter, or merge_adapter false, of all of them); false runs every step on the main graph",
  }),
  graph_capture: bool({
    default: false,
    doc:
      "run those decode steps as a captured graph, replayed each step (onnxruntime's enableGraphCapture; " +
      "needs decode_graph); off until measured faster on a GPU (deno task bench --only gpu measures it)",
  }),
  forward_session: bool({
    default: true,
    doc: "run the passes that read no gradient (the KL reference, the sampler-trainer correction's old " +
      "log-probs, GSPO's sequence ratio, PPO's values) as the train graph's forward alone, in a second " +
      "session holding a second copy of the weights (about a third of the whole graph's kernels; the same " +
      "log-probs bit for bit); false runs the whole graph for them",
  }),
};

/** The resolved `model.webgpu` section. */
export type WebGpuConfig = Infer<typeof webgpu>;

/** The WebGPU provider options `model.webgpu` sets, by onnxruntime's key (every key, defaults too). */
export function webgpuProviderOptions(config: WebGpuConfig): Record<keyof WebGpuOptions, string> {
  const entries = Object.entries(WEBGPU_OPTION_NAMES).map(([key, option]) => [
    option,
    config[key as keyof WebGpuConfig],
  ]);
  return Object.fromEntries(entries);
}

/** `model.ep`'s provider options, for every session the model opens: `model.webgpu`'s on webgpu, else none. */
export function providerOptionsOf(model: { ep: ExecutionProvider; webgpu: WebGpuConfig }): ProviderOptions {
  return model.ep === "webgpu" ? webgpuProviderOptions(model.webgpu) : {};
}

/**
 * `model.merge_adapter` as the policy option `mergeAdapter`: true or false where forced, undefined for auto
 * (the engine then merges on GPU providers only: lib/engine/merged_weights.ts `mergesAdapter`).
 */
export function mergeAdapterOf(model: { merge_adapter: MergeAdapterSetting }): boolean | undefined {
  return model.merge_adapter === "auto" ? undefined : model.merge_adapter === "true";
}

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
  webgpu,
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
  merge_adapter: choice({
    choices: MERGE_ADAPTER_SETTINGS,
    default: "auto",
    doc: "feed the LoRA adapter merged into the Linears (fewer decode kernels; a copy of the Linears): " +
      "auto = on GPU providers, not on cpu | true | false",
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
    // Generated in memory before any work, about 0.25 ms a task on a loaded CI core: 100,000 take some
    // 25 s, and the million the old bound allowed did not finish in minutes (issue 32).
    num_tasks: int({ default: 200, min: 1, max: 100_000, doc: "how many synthetic tasks to generate" }),
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
