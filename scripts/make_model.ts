/**
 * `deno task make-model`: writes a random-init Qwen3 model directory in Hugging Face layout.
 *
 *   deno task make-model --out models/tiny --preset tiny
 *   deno task make-model --out models/q06 --preset qwen3-0.6b-shape --dtype bfloat16 --shards 2
 *
 * @module
 */

import { UserError } from "../lib/errors.ts";
import { writeDirAtomic } from "../lib/fs/atomic_dir.ts";
import { checkOutputPath } from "../lib/fs/output.ts";
import { QWEN3_TOKENIZER_SIZE } from "../lib/model/bundled_tokenizer.ts";
import { parseCommandLine } from "../lib/cli/args.ts";
import { progress } from "../lib/progress.ts";
import {
  QWEN3_06B_SHAPE_PRESET,
  type RandomQwen3Options,
  TINY_PRESET,
  writeRandomQwen3,
} from "../lib/model/random_model.ts";
import type { TorchDType } from "../lib/model/hf_config.ts";
import { resolve } from "node:path";

const PRESETS: Record<string, RandomQwen3Options> = {
  tiny: TINY_PRESET,
  "qwen3-0.6b-shape": QWEN3_06B_SHAPE_PRESET,
};

/** Integer flags and the option each sets. */
const INT_FLAGS: Record<string, keyof RandomQwen3Options> = {
  layers: "layers",
  hidden: "hidden",
  heads: "heads",
  "kv-heads": "kvHeads",
  "head-dim": "headDim",
  intermediate: "intermediate",
  seed: "seed",
  shards: "shards",
  vocab: "vocab",
  "max-positions": "maxPositions",
};

export const HELP = `deno task make-model --out DIR [--preset tiny|qwen3-0.6b-shape] [flags]

Writes a random-init Qwen3 model (config.json, generation_config.json, model.safetensors with Hugging Face
tensor names, Qwen3's real tokenizer files). Flags override the preset (default preset: tiny).

  --out DIR            model directory to write (created; an earlier make-model output is replaced only
                       with --overwrite, anything else is refused)
  --overwrite          replace a model directory written earlier by make-model
  --preset NAME        tiny (2 layers, hidden 64, 4/2 heads of dim 16, MLP 128, float32, tied)
                       qwen3-0.6b-shape (28 layers, hidden 1024, 16/8 heads of dim 128, MLP 3072, bfloat16, tied)
  --layers N  --hidden N  --heads N  --kv-heads N  --head-dim N  --intermediate N
  --dtype float32|bfloat16|float16
  --seed N             PRNG seed (default 0); the same flags and seed give the same bytes
  --tied | --untied    tie lm_head to the embedding table, or write a separate lm_head.weight
  --shards N           split the weights into N safetensors shards plus model.safetensors.index.json
  --vocab N            vocabulary rows (default 151936, Qwen3's)
  --rope-theta X       RoPE base (default 1000000)
  --max-positions N    max_position_embeddings (default 40960)
  --debug              show stack traces
  --help               this text

A model whose checkpoint would not fit in the available memory (MemAvailable in /proc/meminfo, or a
64 GiB cap where that cannot be read) is refused with its estimated size before anything is written.

Examples:
  deno task make-model --out runs/tiny --preset tiny
  deno task make-model --out runs/q06 --preset qwen3-0.6b-shape --dtype bfloat16 --shards 2
  deno task make-model --out runs/small --layers 4 --hidden 128 --heads 4 --kv-heads 2 --head-dim 32`;

/** What the command line asks for. */
export interface MakeModelArgs {
  out: string;
  options: RandomQwen3Options;
  overwrite: boolean;
}

/** Turns command-line flags into options (throws UserError on bad input, naming the flag). */
export function optionsFromArgs(args: string[]): MakeModelArgs | "help" {
  const { values: v } = parseCommandLine(args, {
    command: "deno task make-model",
    string: ["out", "preset", "dtype", "rope-theta", ...Object.keys(INT_FLAGS)],
    boolean: ["tied", "untied", "help", "debug", "overwrite"],
  });
  if (v.help) return "help";
  if (typeof v.out !== "string") {
    throw new UserError("make-model: --out DIR is required", {
      why: "it names the model directory to write",
      fix: "pass --out DIR (a new directory)",
    });
  }
  const presetName = (v.preset as string | undefined) ?? "tiny";
  const preset = PRESETS[presetName];
  if (!preset) {
    throw new UserError("--preset", {
      value: presetName,
      why: "unknown preset",
      fix: `use --preset ${Object.keys(PRESETS).join(" or --preset ")}`,
    });
  }
  const options: RandomQwen3Options = { ...preset };
  for (const [flag, key] of Object.entries(INT_FLAGS)) {
    if (v[flag] !== undefined) {
      (options as unknown as Record<string, number>)[key] = intFlag(flag, v[flag] as string);
    }
  }
  if (v.dtype !== undefined) options.dtype = v.dtype as TorchDType;
  if (v["rope-theta"] !== undefined) options.ropeTheta = Number(v["rope-theta"]);
  if (v.tied && v.untied) {
    throw new UserError("--tied / --untied", { why: "both given", fix: "pass one of them" });
  }
  if (v.tied || v.untied) options.tiedHead = Boolean(v.tied);
  checkShape(options);
  return { out: v.out, options, overwrite: v.overwrite === true };
}

/** The shape rules of a Qwen3 model, each error naming the flag to change. */
function checkShape(o: RandomQwen3Options): void {
  const flag = (key: string) => Object.entries(INT_FLAGS).find(([, k]) => k === key)?.[0] ?? key;
  for (
    const key of ["layers", "hidden", "heads", "kvHeads", "headDim", "intermediate", "shards", "maxPositions"]
  ) {
    const value = (o as unknown as Record<string, number | undefined>)[key];
    if (value !== undefined && value <= 0) {
      throw new UserError(`--${flag(key)}`, {
        value,
        why: "must be at least 1",
        fix: `pass --${flag(key)} N with N ≥ 1`,
      });
    }
  }
  if (o.heads % o.kvHeads !== 0) {
    throw new UserError("--heads / --kv-heads", {
      value: `${o.heads} / ${o.kvHeads}`,
      why: "the query heads must be a multiple of the key/value heads (each KV head serves the same number)",
      fix: `pass --heads ${
        o.kvHeads * Math.max(1, Math.round(o.heads / o.kvHeads))
      }, or a --kv-heads that divides ${o.heads}`,
    });
  }
  if (o.headDim % 2 !== 0) {
    throw new UserError("--head-dim", {
      value: o.headDim,
      why: "must be even (RoPE rotates pairs)",
      fix: `pass --head-dim ${o.headDim + 1}`,
    });
  }
  if (!["float32", "bfloat16", "float16"].includes(o.dtype)) {
    throw new UserError("--dtype", {
      value: o.dtype,
      why: "unknown dtype",
      fix: "pass --dtype float32, bfloat16 or float16",
    });
  }
  if (o.vocab !== undefined && o.vocab < QWEN3_TOKENIZER_SIZE) {
    throw new UserError("--vocab", {
      value: o.vocab,
      why: `Qwen3's tokenizer (written into the model) has ${QWEN3_TOKENIZER_SIZE} ids, each needs a row`,
      fix: `pass --vocab ${QWEN3_TOKENIZER_SIZE} or more, or leave --vocab out (151936)`,
    });
  }
  if (o.ropeTheta !== undefined && !(o.ropeTheta > 0)) {
    throw new UserError("--rope-theta", {
      value: o.ropeTheta,
      why: "must be a positive number",
      fix: "pass --rope-theta 1000000",
    });
  }
  if (o.seed > 0xffffffff) {
    throw new UserError("--seed", { value: o.seed, why: "must be below 2^32", fix: "pass a smaller --seed" });
  }
}

/** Bytes of the checkpoint the options describe (weights only; the tokenizer adds about 11 MB). */
export function estimatedBytes(o: RandomQwen3Options): number {
  const vocab = o.vocab ?? 151936;
  const q = o.heads * o.headDim, kv = o.kvHeads * o.headDim;
  const perLayer = o.hidden * (2 * q + 2 * kv) + 3 * o.hidden * o.intermediate + 2 * o.hidden + 2 * o.headDim;
  const params = vocab * o.hidden * (o.tiedHead ? 1 : 2) + o.layers * perLayer + o.hidden;
  return params * (o.dtype === "float32" ? 4 : 2);
}

/** Memory available to load a model: MemAvailable (Linux), else a fixed cap of 64 GiB. */
export async function availableMemory(): Promise<{ bytes: number; source: string }> {
  try {
    const text = await Deno.readTextFile("/proc/meminfo");
    const kb = Number(/^MemAvailable:\s+(\d+) kB/m.exec(text)?.[1]);
    if (kb > 0) return { bytes: kb * 1024, source: "available memory" };
  } catch {
    // not Linux, or /proc unreadable: the fixed cap below
  }
  return { bytes: 64 * 2 ** 30, source: "the 64 GiB cap used where available memory cannot be read" };
}

/** Refuses a model that could not be loaded in this machine's memory, before anything is written. */
export async function checkFits(o: RandomQwen3Options): Promise<void> {
  const need = estimatedBytes(o);
  const { bytes, source } = await availableMemory();
  if (need > bytes) {
    throw new UserError("make-model: the model", {
      value: `${gib(need)} GiB`,
      why: `its weights would not fit in memory (${gib(bytes)} GiB, ${source}), so nothing could load it`,
      fix: "pass smaller --layers, --hidden, --intermediate or --vocab, or --dtype bfloat16",
    });
  }
}

function gib(bytes: number): string {
  return (bytes / 2 ** 30).toPrecision(3);
}

function intFlag(flag: string, text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n)) {
    throw new UserError(`--${flag}`, {
      value: text,
      why: "must be a non-negative integer",
      fix: `pass --${flag} N`,
    });
  }
  return n;
}

/** CLI entry: one-line errors with exit code 2, stack traces only with --debug. */
export async function main(args: string[]): Promise<number> {
  try {
    const parsed = optionsFromArgs(args);
    if (parsed === "help") {
      console.log(HELP);
      return 0;
    }
    await checkFits(parsed.options);
    await checkOutputPath(parsed.out, { kind: "model-dir" }, { overwrite: parsed.overwrite });
    const task = progress.start(
      `make-model: writing ${parsed.out} (about ${gib(estimatedBytes(parsed.options))} GiB)`,
    );
    let files: string[] = [];
    await writeDirAtomic(parsed.out, async (tmp) => {
      files = (await writeRandomQwen3(tmp, parsed.options)).files;
    }, { kind: "model-dir" });
    task.done("done");
    console.log(`wrote ${resolve(parsed.out)} (${files.join(", ")})`);
    return 0;
  } catch (e) {
    if (e instanceof UserError && !args.includes("--debug")) {
      console.error(`error: ${e.message}`);
      return 2;
    }
    throw e;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
