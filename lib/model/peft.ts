/**
 * PEFT adapter directories: `adapter_config.json` + `adapter_model.safetensors` (float32), the layout
 * `peft.PeftModel.from_pretrained`, vLLM's LoRA loader and transformers read.
 *
 * Read: LoRA only (no DoRA, no per-module rank or alpha patterns, no bias), targets among the seven
 * Qwen3 projections (a list, or "all-linear"), every tensor present with its expected shape.
 * Write: atomically, as a directory written beside the target and renamed over it.
 *
 * @module
 */

import { isAbsolute, join, relative, resolve } from "node:path";
import { UserError } from "../errors.ts";
import { writeDirAtomic } from "../fs/atomic_dir.ts";
import { readHeader, readTensor, writeSafetensors, writeTextAtomic } from "../safetensors/mod.ts";
import type { Qwen3Config } from "./hf_config.ts";
import {
  type Adapter,
  LORA_TARGET_NAMES,
  type LoraSpec,
  type LoraTargetName,
  loraTensorSpecs,
  orderedTargets,
  TARGET_MODULE,
} from "./lora.ts";

export const ADAPTER_CONFIG = "adapter_config.json";
export const ADAPTER_WEIGHTS = "adapter_model.safetensors";

/** Reads a PEFT LoRA adapter made for a model with `cfg`. */
export async function readPeftAdapter(dir: string, cfg: Qwen3Config): Promise<Adapter> {
  const spec = parseAdapterConfig(await readJson(join(dir, ADAPTER_CONFIG)), join(dir, ADAPTER_CONFIG));
  const path = join(dir, ADAPTER_WEIGHTS);
  const header = await readHeader(path).catch((e) => {
    if (e instanceof Deno.errors.NotFound) throw bad(path, "it does not exist", "save the adapter again");
    throw e;
  });
  const weights = new Map<string, Float32Array>();
  for (const t of loraTensorSpecs(cfg, spec)) {
    const info = header.tensors.get(t.key);
    if (!info) throw bad(`${path}: tensor "${t.key}"`, "it is missing", "save the adapter again");
    if (info.shape.join() !== t.dims.join()) {
      throw new UserError(`${path}: tensor "${t.key}"`, {
        value: info.shape,
        why: `the base model and r=${spec.r} need shape [${t.dims}]`,
        fix: "use the adapter with the base model it was trained on",
      });
    }
    const tensor = await readTensor(header, t.key, { asFloat32: true });
    if (!(tensor.data instanceof Float32Array)) {
      throw bad(
        `${path}: tensor "${t.key}"`,
        `dtype ${info.dtype} is not a float type`,
        "save the adapter again",
      );
    }
    weights.set(t.key, tensor.data);
  }
  return { spec, weights };
}

/**
 * What `base_model_name_or_path` says for a base model at `modelDir`, so that peft's
 * `AutoPeftModelForCausalLM.from_pretrained(adapter)` finds it on another machine too (an absolute path
 * of the training machine would not exist there), in this order:
 * 1. the Hugging Face Hub id in its config.json's `_name_or_path` (`Qwen/Qwen3-0.6B`);
 * 2. the Hub id of a Hugging Face cache snapshot (`…/models--Qwen--Qwen3-0.6B/snapshots/…`);
 * 3. else the directory relative to the working directory training ran in (`runs/demo/model`), which
 *    peft resolves from the directory Python runs in.
 */
export async function peftBaseModelName(modelDir: string): Promise<string> {
  const fromConfig = await Deno.readTextFile(join(modelDir, "config.json"))
    .then((text) => JSON.parse(text)?._name_or_path, () => undefined);
  if (typeof fromConfig === "string" && HUB_ID.test(fromConfig)) return fromConfig;
  const cached = /(?:^|\/)models--([\w.-]+)--([\w.-]+)\/snapshots\//.exec(resolve(modelDir));
  if (cached) return `${cached[1]}/${cached[2]}`;
  return isAbsolute(modelDir) ? relative(Deno.cwd(), modelDir) || "." : modelDir;
}

/** A Hugging Face Hub model id: `owner/name`, neither a path that starts at / or . nor one with more parts. */
const HUB_ID = /^[\w-][\w.-]*\/[\w.-]+$/;

/** Writes `adapter` as a PEFT directory at `dir` (replacing it atomically). */
export async function writePeftAdapter(
  dir: string,
  adapter: Adapter,
  cfg: Qwen3Config,
  baseModel: string,
): Promise<void> {
  await writeDirAtomic(dir, (tmp) => writePeftFiles(tmp, adapter, cfg, baseModel));
}

/** Writes the two PEFT files into the existing folder `dir` (for callers that add more files). */
export async function writePeftFiles(dir: string, adapter: Adapter, cfg: Qwen3Config, baseModel: string) {
  const tensors = loraTensorSpecs(cfg, adapter.spec).map((t) => ({
    name: t.key,
    dtype: "F32" as const,
    shape: [...t.dims],
    data: adapter.weights.get(t.key) ?? missing(t.key),
  }));
  await writeSafetensors(join(dir, ADAPTER_WEIGHTS), tensors, { format: "pt" });
  await writeTextAtomic(
    join(dir, ADAPTER_CONFIG),
    JSON.stringify(adapterConfig(adapter.spec, baseModel), null, 2),
  );
}

/** The adapter_config.json PEFT writes for a LoRA on a causal LM. */
export function adapterConfig(spec: LoraSpec, baseModel: string): Record<string, unknown> {
  return {
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: baseModel,
    r: spec.r,
    lora_alpha: spec.alpha,
    lora_dropout: 0,
    use_rslora: spec.rslora,
    use_dora: false,
    bias: "none",
    fan_in_fan_out: false,
    init_lora_weights: true,
    inference_mode: true,
    target_modules: orderedTargets(spec.targets).map((t) => TARGET_MODULE[t]),
    modules_to_save: null,
    layers_to_transform: null,
    rank_pattern: {},
    alpha_pattern: {},
  };
}

/** Validates a parsed adapter_config.json; `path` names the file in errors. */
export function parseAdapterConfig(raw: unknown, path: string): LoraSpec {
  const r = (raw ?? {}) as Record<string, unknown>;
  const fail = (key: string, why: string) =>
    new UserError(`${path}: ${key}`, {
      value: r[key],
      why,
      fix: "use a PEFT LoRA adapter for a Qwen3 model",
    });
  if (r.peft_type !== "LORA") throw fail("peft_type", "only LORA adapters are supported");
  if (!Number.isSafeInteger(r.r) || (r.r as number) < 1) throw fail("r", "must be a positive integer");
  if (typeof r.lora_alpha !== "number" || !(r.lora_alpha > 0)) {
    throw fail("lora_alpha", "must be a positive number");
  }
  if (r.use_dora === true) throw fail("use_dora", "DoRA adapters are not supported");
  if (r.bias !== undefined && r.bias !== "none") throw fail("bias", 'only bias "none" is supported');
  for (const key of ["rank_pattern", "alpha_pattern"]) {
    if (r[key] && Object.keys(r[key] as object).length > 0) {
      throw fail(key, "per-module ranks or alphas are not supported");
    }
  }
  if (r.layers_to_transform !== undefined && r.layers_to_transform !== null) {
    throw fail("layers_to_transform", "adapters on a subset of layers are not supported");
  }
  return {
    r: r.r as number,
    alpha: r.lora_alpha,
    rslora: r.use_rslora === true,
    targets: parseTargets(r.target_modules, fail),
  };
}

function parseTargets(value: unknown, fail: (key: string, why: string) => UserError): LoraTargetName[] {
  if (value === "all-linear") return [...LORA_TARGET_NAMES];
  const byModule = new Map(LORA_TARGET_NAMES.map((t) => [TARGET_MODULE[t] as string, t]));
  if (!Array.isArray(value) || value.length === 0) {
    throw fail("target_modules", "must be a list of module names");
  }
  const targets = value.map((m) => {
    const t = typeof m === "string" ? byModule.get(m) : undefined;
    if (!t) {
      throw fail("target_modules", `${JSON.stringify(m)} is not one of ${[...byModule.keys()].join(", ")}`);
    }
    return t;
  });
  return orderedTargets(targets);
}

async function readJson(path: string): Promise<unknown> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw bad(
        path,
        "it does not exist",
        "pass a PEFT adapter directory (adapter_config.json + adapter_model.safetensors)",
      );
    }
    throw e;
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new UserError(path, {
      value: (e as Error).message,
      why: "it is not valid JSON",
      fix: "save the adapter again",
    });
  }
}

function bad(what: string, why: string, fix: string): UserError {
  return new UserError(what, { why, fix });
}

function missing(key: string): never {
  throw new Error(`writePeftAdapter: adapter has no tensor ${key}`);
}
