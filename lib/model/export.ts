/**
 * Exports a policy (a Qwen3 model directory, optionally with a LoRA adapter merged in) as an ONNX
 * model directory that transformers.js (`@huggingface/transformers` 4.x) loads with
 * `AutoModelForCausalLM.from_pretrained(dir, { dtype: "fp32" })` and runs with its own `generate`:
 * in a browser, or as a decode-speed peer of our engine.
 *
 * ```
 * out/
 *   config.json               the model's, plus "transformers.js_config" (fp32, external data)
 *   generation_config.json    copied (or made from config.json's token ids)
 *   tokenizer.json, tokenizer_config.json (+ chat_template.jinja etc. when present), copied as is
 *   onnx/model.onnx           the decoder graph (see export_graph.ts for its inputs and outputs)
 *   onnx/model.onnx_data      float32 weights, merged, as ONNX external data (4 KiB-aligned tensors)
 * ```
 *
 * The directory is built beside `outDir` under a temporary name and renamed into place, so a crash
 * leaves the old export or the new one. An existing `outDir` is replaced only when it is empty or
 * a previous export (it holds `onnx/model.onnx`).
 *
 * transformers.js feeds `input_ids`, `attention_mask`, `position_ids` (it makes them from the mask:
 * `cumsum(mask) - 1`, 1 where masked, the last T columns once there is a past) and the cache, empty
 * ([B, nKV, 0, D], sized from the graph's input metadata) on the first call. Batched prompts must be
 * left-padded: Qwen3's tokenizer_config.json (copied as is) sets no `padding_side`, and transformers.js
 * then pads on the right, so set `tokenizer.padding_side = "left"` before batching.
 *
 * Deviations from an Optimum export: primitive ops only (no GroupQueryAttention / MatMulNBits), no
 * `num_logits_to_keep` input (logits for every position), float32 only, one data file (browsers may
 * need chunks below 2 GB for larger models).
 *
 * @module
 */

import { dirname, join, resolve, sep } from "node:path";
import { UserError } from "../errors.ts";
import { writeDirAtomic } from "../fs/atomic_dir.ts";
import { readTextIfExists } from "../fs/read.ts";
import { GraphBuilder, type Value } from "../onnx/builder.ts";
import { buildDecoderGraph } from "./export_graph.ts";
import {
  checkAdapter,
  type MergeAdapter,
  type MergePair,
  planWeights,
  writeWeights,
} from "./export_weights.ts";
import { linearPath, type ModelDir, openModelDir } from "./model_dir.ts";
import type { Qwen3Config } from "./hf_config.ts";
import { type Adapter, loraScale, loraTensorSpecs } from "./lora.ts";
import { TOKENIZER_FILES } from "./tokenizer.ts";
import { pathExists as exists } from "../fs/read.ts";

export type { MergeAdapter, MergePair } from "./export_weights.ts";

/** Options of `exportForTransformersJs`. */
export interface ExportOptions {
  /** A LoRA adapter merged into the weights (`W' = W + scale · B · A`). */
  adapter?: MergeAdapter;
}

/** File names inside the export's `onnx/` folder (transformers.js derives the data name from the model's). */
export const ONNX_FILE = "model.onnx";
export const DATA_FILE = "model.onnx_data";

/** Tokenizer side files copied when the source directory has them. */
const OPTIONAL_FILES = ["chat_template.jinja", "special_tokens_map.json", "vocab.json", "merges.txt"];

/** Writes the transformers.js export of `modelDir` (+ `options.adapter`) to `outDir`. */
export async function exportForTransformersJs(
  modelDir: string,
  outDir: string,
  options: ExportOptions = {},
): Promise<void> {
  const model = await openModelDir(modelDir);
  checkAdapter(model.config, options.adapter);
  const out = resolve(outDir);
  await checkTarget(model.dir, out);
  await Deno.mkdir(dirname(out), { recursive: true });
  await writeDirAtomic(out, async (tmp) => {
    await Deno.mkdir(join(tmp, "onnx"));
    await writeOnnx(model, join(tmp, "onnx"), options.adapter);
    await writeSideFiles(model, tmp);
  });
}

/** `model.onnx` (graph, external initializers) and `model.onnx_data` (weights) into `dir`. */
async function writeOnnx(model: ModelDir, dir: string, adapter?: MergeAdapter): Promise<void> {
  const plan = planWeights(model.config);
  await writeWeights(model, plan, join(dir, DATA_FILE), adapter);
  const g = new GraphBuilder("qwen3_decoder");
  const refs = new Map<string, Value>();
  for (const t of plan) {
    const ref = { location: DATA_FILE, offset: t.offset, length: t.length };
    refs.set(t.name, g.external(t.name, "float32", t.dims, ref));
  }
  buildDecoderGraph(g, model.config, (name) => {
    const v = refs.get(name);
    if (!v) throw new Error(`export graph: weight ${name} is not in the export plan`);
    return v;
  });
  const metadata: Record<string, string> = {
    source_model: model.dir,
    merged_adapter: adapter ? `${adapter.pairs.size} pairs, scale ${adapter.scale}` : "none",
  };
  await Deno.writeFile(join(dir, ONNX_FILE), g.toModel({ metadata, doc: "Qwen3 decoder with KV cache" }));
}

/** config.json (with transformers.js settings), generation config and tokenizer files into `dir`. */
async function writeSideFiles(model: ModelDir, dir: string): Promise<void> {
  const raw = JSON.parse(await Deno.readTextFile(join(model.dir, "config.json")));
  await Deno.writeTextFile(join(dir, "config.json"), json(exportConfig(raw, model)));
  const gen = await readTextIfExists(join(model.dir, "generation_config.json"));
  const genJson = gen ??
    json({ bos_token_id: model.config.bos_token_id, eos_token_id: model.config.eos_token_id });
  await Deno.writeTextFile(join(dir, "generation_config.json"), genJson);
  for (const name of TOKENIZER_FILES) {
    const text = await readTextIfExists(join(model.dir, name));
    if (text === null) {
      throw new UserError(`tokenizer file ${join(model.dir, name)}`, {
        why: "it does not exist, and transformers.js needs it beside the exported model",
        fix: "copy the model's tokenizer.json and tokenizer_config.json into the model directory",
      });
    }
    await Deno.writeTextFile(join(dir, name), text);
  }
  for (const name of OPTIONAL_FILES) {
    const text = await readTextIfExists(join(model.dir, name));
    if (text !== null) await Deno.writeTextFile(join(dir, name), text);
  }
}

/** The model's config.json with the fields the graph relies on made explicit and transformers.js settings. */
function exportConfig(raw: Record<string, unknown>, model: ModelDir): Record<string, unknown> {
  const cfg = model.config;
  return {
    ...raw,
    head_dim: cfg.head_dim,
    num_key_value_heads: cfg.num_key_value_heads,
    use_cache: true,
    "transformers.js_config": {
      dtype: "fp32",
      use_external_data_format: { [ONNX_FILE]: 1 },
    },
  };
}

/** Refuses targets that would destroy the source or an unrelated directory. */
async function checkTarget(source: string, out: string): Promise<void> {
  if (out === source || source.startsWith(out + sep)) {
    throw new UserError(`export directory ${out}`, {
      why: `it is (or contains) the source model directory ${source}, which replacing it would delete`,
      fix: "export to a new directory, e.g. runs/<name>/export",
    });
  }
  let entries: string[];
  try {
    entries = [];
    for await (const e of Deno.readDir(out)) entries.push(e.name);
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  if (entries.length === 0 || await exists(join(out, "onnx", ONNX_FILE))) return;
  throw new UserError(`export directory ${out}`, {
    value: entries.slice(0, 5),
    why: "it exists, is not empty and is not a previous export (no onnx/model.onnx), so it is not replaced",
    fix: "choose a new or empty directory, or remove this one",
  });
}

function json(value: unknown): string {
  return JSON.stringify(value, null, 2) + "\n";
}

/** A PEFT adapter (lora.ts) in the exporter's form: pairs keyed by module path, scale applied. */
export function mergeAdapterOf(adapter: Adapter, cfg: Qwen3Config): MergeAdapter {
  const pairs = new Map<string, MergePair>();
  const specs = loraTensorSpecs(cfg, adapter.spec);
  for (const a of specs.filter((t) => t.which === "A")) {
    const b = specs.find((t) => t.which === "B" && t.layer === a.layer && t.linear === a.linear)!;
    pairs.set(linearPath(a.layer, a.linear), {
      a: adapter.weights.get(a.key)!,
      aShape: a.dims,
      b: adapter.weights.get(b.key)!,
      bShape: b.dims,
    });
  }
  return { scale: loraScale(adapter.spec), pairs };
}
