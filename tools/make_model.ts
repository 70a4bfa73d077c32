/**
 * `deno task make-model`: writes a random-init Qwen3 model directory in Hugging Face layout.
 *
 *   deno task make-model --out models/tiny --preset tiny
 *   deno task make-model --out models/q06 --preset qwen3-0.6b-shape --dtype bfloat16 --shards 2
 *
 * @module
 */

import { parseArgs } from "@std/cli";
import { UserError } from "../lib/errors.ts";
import {
  QWEN3_06B_SHAPE_PRESET,
  type RandomQwen3Options,
  TINY_PRESET,
  writeRandomQwen3,
} from "../lib/model/random_model.ts";
import type { TorchDType } from "../lib/model/hf_config.ts";

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

  --out DIR            model directory to write (created if missing; model files are replaced)
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
  --help               this text`;

/** Turns command-line flags into options (throws UserError on bad input). */
export function optionsFromArgs(args: string[]): { out: string; options: RandomQwen3Options } | "help" {
  let parsed;
  try {
    parsed = parseArgs(args, {
      string: ["out", "preset", "dtype", "rope-theta", ...Object.keys(INT_FLAGS)],
      boolean: ["tied", "untied", "help", "debug"],
    });
  } catch (e) {
    throw new UserError("make-model flags", {
      value: args.join(" "),
      why: (e as Error).message,
      fix: "see --help",
    });
  }
  const v = parsed.values;
  if (v.help) return "help";
  if (parsed.positionals.length || parsed.overrides.length) {
    const extra = [...parsed.positionals, ...parsed.overrides.map(([k]) => `--${k}`)];
    throw new UserError("make-model arguments", {
      value: extra.join(" "),
      why: "unexpected",
      fix: "see --help",
    });
  }
  if (typeof v.out !== "string") {
    throw new UserError("--out", { why: "it is required", fix: "pass --out DIR" });
  }
  const presetName = (v.preset as string | undefined) ?? "tiny";
  const preset = PRESETS[presetName];
  if (!preset) {
    throw new UserError("--preset", {
      value: presetName,
      why: "unknown preset",
      fix: `use ${Object.keys(PRESETS).join(" or ")}`,
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
  return { out: v.out, options };
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
    const started = performance.now();
    const { dir, files } = await writeRandomQwen3(parsed.out, parsed.options);
    const seconds = ((performance.now() - started) / 1000).toFixed(1);
    console.log(`wrote ${dir} (${files.join(", ")}) in ${seconds} s`);
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
