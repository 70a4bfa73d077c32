/**
 * `config.json` of a Hugging Face Qwen3 model: read, validate, and write.
 *
 * Field names are Hugging Face's (snake_case), so the object matches the file and the transformers docs.
 * Defaults for missing optional fields are those of transformers' `Qwen3Config`.
 *
 * @module
 */

import { join } from "node:path";
import { UserError } from "../errors.ts";

/** Checkpoint element types a Qwen3 config can name. */
export type TorchDType = "float32" | "bfloat16" | "float16";

/** The Qwen3 fields the toolkit uses. */
export interface Qwen3Config {
  vocab_size: number;
  hidden_size: number;
  intermediate_size: number;
  num_hidden_layers: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
  rms_norm_eps: number;
  rope_theta: number;
  max_position_embeddings: number;
  tie_word_embeddings: boolean;
  /** Storage dtype (`torch_dtype`, or `dtype` in newer transformers). */
  torch_dtype: TorchDType;
  bos_token_id: number | null;
  /** One id or several (generation stops at any). */
  eos_token_id: number | number[] | null;
}

/** The softmax scale of Qwen3's attention scores, `1/sqrt(head_dim)` (transformers' `scaling`). */
export function attentionScale(headDim: number): number {
  return 1 / Math.sqrt(headDim);
}

/** The `config.json` path of a model directory. */
export function configPath(dir: string): string {
  return join(dir, "config.json");
}

/** Reads and validates `dir/config.json` as a Qwen3 causal LM config. */
export async function readQwen3Config(dir: string): Promise<Qwen3Config> {
  const path = configPath(dir);
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    throw new UserError(`model config ${path}`, {
      why: "it does not exist",
      fix: "point model.path at a Hugging Face model directory, or make one with `deno task make-model`",
    });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UserError(`model config ${path}`, {
      value: (e as Error).message,
      why: "it is not valid JSON",
      fix: "re-download the model or repair the file",
    });
  }
  return parseQwen3Config(raw, path);
}

/** Validates a parsed `config.json` object; `path` names the file in errors. */
export function parseQwen3Config(raw: unknown, path = "config.json"): Qwen3Config {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new UserError(`model config ${path}`, {
      value: raw,
      why: "it is not a JSON object",
      fix: "repair the file",
    });
  }
  const r = raw as Record<string, unknown>;
  const err = (key: string, value: unknown, why: string, fix: string) =>
    new UserError(`model config ${path}: ${key}`, { value, why, fix });
  checkArchitecture(r, err);
  const int = (key: string, fallback?: number) => {
    const v = r[key] ?? fallback;
    if (!Number.isSafeInteger(v) || (v as number) <= 0) {
      throw err(key, v, "must be a positive integer", "repair config.json");
    }
    return v as number;
  };
  const num = (key: string, fallback: number) => {
    const v = r[key] ?? fallback;
    if (typeof v !== "number" || !(v > 0)) {
      throw err(key, v, "must be a positive number", "repair config.json");
    }
    return v;
  };
  const cfg: Qwen3Config = {
    vocab_size: int("vocab_size"),
    hidden_size: int("hidden_size"),
    intermediate_size: int("intermediate_size"),
    num_hidden_layers: int("num_hidden_layers"),
    num_attention_heads: int("num_attention_heads"),
    num_key_value_heads: int("num_key_value_heads", r.num_attention_heads as number),
    head_dim: int("head_dim", 128), // transformers' Qwen3Config default; real configs always set it
    rms_norm_eps: num("rms_norm_eps", 1e-6),
    rope_theta: ropeTheta(r, err),
    max_position_embeddings: int("max_position_embeddings", 32768),
    tie_word_embeddings: bool(r, "tie_word_embeddings", false, err),
    torch_dtype: torchDType(r, err),
    bos_token_id: tokenId(r, "bos_token_id", err) as number | null,
    eos_token_id: tokenId(r, "eos_token_id", err),
  };
  checkUnsupported(r, err);
  checkShapes(cfg, err);
  return cfg;
}

type ErrFn = (key: string, value: unknown, why: string, fix: string) => UserError;

function checkArchitecture(r: Record<string, unknown>, err: ErrFn) {
  const fix = "use a Qwen3 model (Qwen/Qwen3-0.6B, -1.7B, ...) or one made with `deno task make-model`";
  if (r.model_type !== "qwen3") {
    throw err(
      "model_type",
      r.model_type,
      'this toolkit runs Qwen3 dense models only (model_type "qwen3")',
      fix,
    );
  }
  const archs = r.architectures;
  if (archs !== undefined && !(Array.isArray(archs) && archs.includes("Qwen3ForCausalLM"))) {
    throw err("architectures", archs, 'expected ["Qwen3ForCausalLM"]', fix);
  }
}

/** `rope_theta`, or `rope_parameters.rope_theta` (newer transformers), rejecting any RoPE scaling. */
function ropeTheta(r: Record<string, unknown>, err: ErrFn): number {
  const fix =
    "remove rope_scaling (long-context YaRN scaling is not implemented) or use the model's base config";
  if (r.rope_scaling !== undefined && r.rope_scaling !== null) {
    throw err("rope_scaling", r.rope_scaling, "RoPE scaling is not supported; only plain RoPE", fix);
  }
  const params = r.rope_parameters as Record<string, unknown> | undefined | null;
  if (params && params.rope_type !== undefined && params.rope_type !== "default") {
    throw err("rope_parameters.rope_type", params.rope_type, 'only "default" RoPE is supported', fix);
  }
  const theta = r.rope_theta ?? params?.rope_theta ?? 10000;
  if (typeof theta !== "number" || !(theta > 0)) {
    throw err("rope_theta", theta, "must be a positive number", "repair config.json");
  }
  return theta;
}

function bool(r: Record<string, unknown>, key: string, fallback: boolean, err: ErrFn): boolean {
  const v = r[key] ?? fallback;
  if (typeof v !== "boolean") throw err(key, v, "must be true or false", "repair config.json");
  return v;
}

function torchDType(r: Record<string, unknown>, err: ErrFn): TorchDType {
  const v = r.torch_dtype ?? r.dtype ?? "bfloat16";
  if (v !== "float32" && v !== "bfloat16" && v !== "float16") {
    throw err("torch_dtype", v, "must be float32, bfloat16 or float16", "repair config.json");
  }
  return v;
}

function tokenId(r: Record<string, unknown>, key: string, err: ErrFn): number | number[] | null {
  const v = r[key] ?? null;
  const ok = (x: unknown) => Number.isSafeInteger(x) && (x as number) >= 0;
  if (v === null || ok(v) || (Array.isArray(v) && v.length > 0 && v.every(ok))) {
    return v as number | number[] | null;
  }
  throw err(key, v, "must be a token id, a list of ids, or null", "repair config.json");
}

/** Qwen3 variants the graphs do not implement are rejected rather than silently run wrong. */
function checkUnsupported(r: Record<string, unknown>, err: ErrFn) {
  if (r.attention_bias === true) {
    throw err(
      "attention_bias",
      true,
      "q/k/v/o biases are not implemented",
      "use a model without attention bias",
    );
  }
  if (r.use_sliding_window === true) {
    throw err("use_sliding_window", true, "sliding-window attention is not implemented", "set it to false");
  }
  if (r.hidden_act !== undefined && r.hidden_act !== "silu") {
    throw err("hidden_act", r.hidden_act, "Qwen3's MLP is SwiGLU (silu)", "use a standard Qwen3 config");
  }
}

function checkShapes(cfg: Qwen3Config, err: ErrFn) {
  if (cfg.num_attention_heads % cfg.num_key_value_heads !== 0) {
    throw err(
      "num_key_value_heads",
      cfg.num_key_value_heads,
      `must divide num_attention_heads (${cfg.num_attention_heads}) for grouped-query attention`,
      "repair config.json",
    );
  }
  if (cfg.head_dim % 2 !== 0) {
    throw err("head_dim", cfg.head_dim, "must be even (RoPE rotates pairs)", "repair config.json");
  }
}

/** The full `config.json` object transformers writes for a Qwen3 causal LM with these fields. */
export function qwen3ConfigJson(cfg: Qwen3Config): Record<string, unknown> {
  return {
    architectures: ["Qwen3ForCausalLM"],
    attention_bias: false,
    attention_dropout: 0.0,
    bos_token_id: cfg.bos_token_id,
    eos_token_id: cfg.eos_token_id,
    head_dim: cfg.head_dim,
    hidden_act: "silu",
    hidden_size: cfg.hidden_size,
    initializer_range: 0.02,
    intermediate_size: cfg.intermediate_size,
    max_position_embeddings: cfg.max_position_embeddings,
    max_window_layers: cfg.num_hidden_layers,
    model_type: "qwen3",
    num_attention_heads: cfg.num_attention_heads,
    num_hidden_layers: cfg.num_hidden_layers,
    num_key_value_heads: cfg.num_key_value_heads,
    rms_norm_eps: cfg.rms_norm_eps,
    rope_scaling: null,
    rope_theta: cfg.rope_theta,
    sliding_window: null,
    tie_word_embeddings: cfg.tie_word_embeddings,
    torch_dtype: cfg.torch_dtype,
    transformers_version: "4.51.0",
    use_cache: true,
    use_sliding_window: false,
    vocab_size: cfg.vocab_size,
  };
}
