/** Schema of the `loop`, `eval` and `bench` sections (see schema.ts). */
import { bool, choice, float, int, listOf, str } from "../fields.ts";
import { COMPUTE_DTYPES } from "../../model/graph/forms.ts";
/** Qwen3's context window: no token budget may exceed it. */
export const MAX_CONTEXT = 131072;

/** The scored columns `loop.filter_groups.metric` may name. */
export const FILTER_METRICS = ["reward", "correct"] as const;

export const loop = {
  steps: int({ default: 20, min: 1, doc: "rollout -> score -> mask -> train steps to run" }),
  run_dir: str({
    default: "runs/loop",
    doc: "run directory (config snapshot, step-NNNN/ files, adapters/, latest pointer)",
  }),
  save_every: int({ default: 10, min: 0, doc: "save the adapter every N steps; 0 = only at the end" }),
  eval_every: int({ default: 10, min: 0, doc: "evaluate every N steps; 0 = never" }),
  /** DAPO's dynamic sampling, named after verl's `algorithm.filter_groups` (docs/algorithms.md). */
  filter_groups: {
    enable: bool({
      default: false,
      doc: "drop groups whose episodes all have the same metric and sample more tasks until the step " +
        "has rollout.tasks_per_step groups or max_num_gen_batches is reached (DAPO's dynamic sampling)",
    }),
    metric: choice({
      choices: FILTER_METRICS,
      default: "reward",
      doc: "the scored column whose spread within a group keeps it: reward (verl's score) | correct (acc)",
    }),
    max_num_gen_batches: int({
      default: 10,
      min: 1,
      max: 1000,
      doc: "batches of rollout.tasks_per_step tasks a step may sample at most; reaching it trains on the " +
        "groups kept so far and logs it",
    }),
  },
};

export const evaluation = {
  num_tasks: int({
    default: 64,
    min: 0,
    doc: "held-out tasks: the last num_tasks of the (shuffled) data set, never used for training; " +
      "0 = no held-out split (eval, and the loop with eval_every > 0, then refuse)",
  }),
  samples: int({
    default: 1,
    min: 1,
    max: 1024,
    doc: "episodes per held-out task; pass@k is reported for k = samples",
  }),
  temperature: float({
    default: 0.0,
    min: 0,
    max: 10,
    doc: "sampling temperature for evaluation; 0 = greedy",
  }),
  seed: int({ default: 0, min: 0, doc: "sampling seed when temperature > 0" }),
};

export const bench = {
  models: listOf<string>({
    item: { kind: "string" },
    default: ["tiny", "qwen3-0.6b"],
    minItems: 1,
    doc: "model directories, or built-in random shapes: tiny, qwen3-0.6b",
  }),
  batches: listOf<number>({
    item: { kind: "int", min: 1, max: 4096 },
    default: [1, 8, 32],
    minItems: 1,
    doc: "batch sizes to measure",
  }),
  prompt_tokens: int({ default: 128, min: 1, max: MAX_CONTEXT, doc: "prompt length per sequence" }),
  decode_tokens: int({ default: 64, min: 1, max: MAX_CONTEXT, doc: "tokens decoded per sequence" }),
  repeats: int({
    default: 3,
    min: 1,
    max: 1000,
    doc: "timed repetitions (after one warm-up); the median is reported",
  }),
  rounds: int({
    default: 4,
    min: 1,
    max: 100,
    doc: "--before with engine or train: rounds of the older checkout, this one and the peers (order " +
      "alternating; even, so that each order runs as often); per-round ratios, medians and geometric means",
  }),
  gpu_models: listOf<string>({
    item: { kind: "string" },
    default: ["qwen3-0.6b", "qwen3-1.7b"],
    minItems: 1,
    doc: "--only gpu: model directories, or built-in random shapes: tiny, qwen3-0.6b, qwen3-1.7b",
  }),
  gpu_ep: choice({
    choices: ["webgpu", "cuda"] as const,
    default: "webgpu",
    doc: "--only gpu: the provider",
  }),
  gpu_compute: choice({
    choices: COMPUTE_DTYPES,
    default: "float16",
    doc: "--only gpu: weights and activations (PyTorch's peer uses the same dtype)",
  }),
  gpu_batches: listOf<number>({
    item: { kind: "int", min: 1, max: 4096 },
    default: [1, 8, 32, 64],
    minItems: 1,
    unique: true,
    doc: "--only gpu: decode batch sizes to measure",
  }),
  gpu_train_tokens: listOf<number>({
    item: { kind: "int", min: 8, max: MAX_CONTEXT },
    default: [512, 8192],
    minItems: 1,
    unique: true,
    doc: "--only gpu: tokens per timed train step, one row each (2 sequences of tokens / 2)",
  }),
  gpu_gemm_tokens: listOf<number>({
    item: { kind: "int", min: 1, max: MAX_CONTEXT },
    default: [1, 32, 4096],
    unique: true,
    doc: "--only gpu: row counts at which bench/gemm_forms.ts times each Linear's GEMM forms; [] skips it",
  }),
  gpu_long_cache: int({
    default: 8192,
    min: 0,
    max: MAX_CONTEXT,
    doc: "--only gpu: decode once more at batch 8 (or the largest batch below) in a cache of this many " +
      "positions, beside the same batch's tight cache, to show what attention over a rollout-sized cache " +
      "costs; 0 skips it",
  }),
  gpu_peak_tflops: float({
    default: null,
    nullable: true,
    min: 0,
    minOpen: true,
    doc: "--only gpu: the GPU's dense peak for gpu_compute, for MFU; null = from the GPU's name where known",
  }),
  demo_config: str({
    default: "configs/demo.yaml",
    doc: "--only demo_seeds: the demo configuration to run (relative to the repository root)",
  }),
  demo_seeds: listOf<number>({
    item: { kind: "int", min: 0 },
    default: [1, 2, 3, 4, 5],
    minItems: 1,
    unique: true,
    doc: "--only demo_seeds: the seeds (train.seed and rollout.generation.seed) to run the demo with",
  }),
};
