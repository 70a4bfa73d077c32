/**
 * A Hugging Face Qwen3 model directory: config, checkpoint tensor index, and the tensor names and
 * shapes a Qwen3 config calls for.
 *
 * Dimensions: V vocab, H hidden, I intermediate, nH query heads, nKV key/value heads, D head dim.
 *
 * @module
 */

import { resolve } from "node:path";
import { UserError } from "../errors.ts";
import { type Checkpoint, openCheckpoint } from "../safetensors/mod.ts";
import { type Qwen3Config, readQwen3Config } from "./hf_config.ts";

/** One weight a Qwen3 model needs: Hugging Face name and shape (`[out, in]` for Linears). */
export interface WeightSpec {
  name: string;
  shape: number[];
  /** `norm` weights scale (around 1); `matrix` are Linears; `embedding` the token table / head. */
  kind: "embedding" | "matrix" | "norm";
}

/** The seven LoRA-able Linears of a layer, in Hugging Face order. */
export const QWEN3_LINEARS = [
  "q_proj",
  "k_proj",
  "v_proj",
  "o_proj",
  "gate_proj",
  "up_proj",
  "down_proj",
] as const;

/**
 * The Linears of a layer that read the same input, each group multiplied as one stacked `[Σout, in]`
 * matrix (decoder.ts `linearsWithLora`); shared weights are stored stacked this way (shared_weights.ts).
 */
export const QWEN3_LINEAR_GROUPS: readonly (readonly (typeof QWEN3_LINEARS[number])[])[] = [
  ["q_proj", "k_proj", "v_proj"],
  ["o_proj"],
  ["gate_proj", "up_proj"],
  ["down_proj"],
];

/** `model.layers.N.self_attn.q_proj` etc.: the module path of a Linear. */
export function linearPath(layer: number, linear: typeof QWEN3_LINEARS[number]): string {
  const group = linear === "gate_proj" || linear === "up_proj" || linear === "down_proj"
    ? "mlp"
    : "self_attn";
  return `model.layers.${layer}.${group}.${linear}`;
}

/** `[out, in]` of a Linear under `cfg`. */
export function linearShape(cfg: Qwen3Config, linear: typeof QWEN3_LINEARS[number]): [number, number] {
  const { hidden_size: H, intermediate_size: I, head_dim: D } = cfg;
  const q = cfg.num_attention_heads * D, kv = cfg.num_key_value_heads * D;
  const shapes = {
    q_proj: [q, H], // [nH*D, H]
    k_proj: [kv, H], // [nKV*D, H]
    v_proj: [kv, H], // [nKV*D, H]
    o_proj: [H, q], // [H, nH*D]
    gate_proj: [I, H], // [I, H]
    up_proj: [I, H], // [I, H]
    down_proj: [H, I], // [H, I]
  } as const;
  return [...shapes[linear]] as [number, number];
}

/** Every weight of a Qwen3 checkpoint in Hugging Face order; `lm_head.weight` only when untied. */
export function qwen3Weights(cfg: Qwen3Config): WeightSpec[] {
  const { hidden_size: H, head_dim: D, vocab_size: V } = cfg;
  const out: WeightSpec[] = [{ name: "model.embed_tokens.weight", shape: [V, H], kind: "embedding" }];
  for (let n = 0; n < cfg.num_hidden_layers; n++) {
    const p = `model.layers.${n}`;
    out.push({ name: `${p}.input_layernorm.weight`, shape: [H], kind: "norm" });
    for (const lin of QWEN3_LINEARS.slice(0, 4)) {
      out.push({ name: `${linearPath(n, lin)}.weight`, shape: linearShape(cfg, lin), kind: "matrix" });
    }
    out.push({ name: `${p}.self_attn.q_norm.weight`, shape: [D], kind: "norm" });
    out.push({ name: `${p}.self_attn.k_norm.weight`, shape: [D], kind: "norm" });
    out.push({ name: `${p}.post_attention_layernorm.weight`, shape: [H], kind: "norm" });
    for (const lin of QWEN3_LINEARS.slice(4)) {
      out.push({ name: `${linearPath(n, lin)}.weight`, shape: linearShape(cfg, lin), kind: "matrix" });
    }
  }
  out.push({ name: "model.norm.weight", shape: [H], kind: "norm" });
  if (!cfg.tie_word_embeddings) out.push({ name: "lm_head.weight", shape: [V, H], kind: "embedding" });
  return out;
}

/** Throws a UserError naming the first weight that is missing, misshapen or not a float. */
export function checkQwen3Checkpoint(cfg: Qwen3Config, ckpt: Checkpoint): void {
  for (const spec of qwen3Weights(cfg)) {
    const t = ckpt.tensors.get(spec.name);
    const what = `checkpoint ${ckpt.dir}: tensor "${spec.name}"`;
    const fix = "check that config.json belongs to these weights";
    if (!t) throw new UserError(what, { why: `it is missing (expected shape [${spec.shape}])`, fix });
    if (t.shape.join(",") !== spec.shape.join(",")) {
      throw new UserError(what, { value: t.shape, why: `config.json implies shape [${spec.shape}]`, fix });
    }
    if (!["F32", "F16", "BF16"].includes(t.dtype)) {
      throw new UserError(what, { value: t.dtype, why: "weights must be F32, F16 or BF16", fix });
    }
  }
}

/** A model directory opened for use: validated config and checkpoint index (headers only). */
export interface ModelDir {
  /** Absolute path. */
  dir: string;
  config: Qwen3Config;
  checkpoint: Checkpoint;
}

/** Opens and validates a Qwen3 model directory (the tokenizer is loaded separately: `loadTokenizer`). */
export async function openModelDir(dir: string): Promise<ModelDir> {
  const abs = resolve(dir);
  const config = await readQwen3Config(abs);
  const checkpoint = await openCheckpoint(abs);
  checkQwen3Checkpoint(config, checkpoint);
  return { dir: abs, config, checkpoint };
}
