/**
 * Loads a model directory's tokenizer and chat template through transformers.js `AutoTokenizer`,
 * strictly from local files: remote loading off, no cache writes.
 *
 * transformers.js is imported lazily: it loads native modules (onnxruntime-node, sharp), which need
 * `--allow-ffi`, and code that only reads configs or checkpoints should not pay for them.
 *
 * @module
 */

import { join, resolve } from "node:path";
import { UserError } from "../errors.ts";
import { readTextIfExists } from "../fs/read.ts";
import { ChatTokenizer, type HfTokenizer } from "./chat.ts";
import { sha256Hex } from "../fs/sha256.ts";

/** File names of the tokenizer in a Hugging Face model directory. */
export const TOKENIZER_FILES = ["tokenizer.json", "tokenizer_config.json"] as const;
/** Newer transformers save the template beside tokenizer_config.json instead of inside it. */
const TEMPLATE_FILE = "chat_template.jinja";

/** Loads the tokenizer and chat template of the model directory `dir` (absolute or relative). */
export async function loadTokenizer(dir: string): Promise<ChatTokenizer> {
  const abs = resolve(dir);
  await requireFiles(abs);
  const hf = await fromPretrained(abs);
  if (!hf.chat_template) hf.chat_template = await readTextIfExists(join(abs, TEMPLATE_FILE));
  if (typeof hf.chat_template !== "string" || hf.chat_template.length === 0) {
    throw new UserError(`tokenizer in ${abs}`, {
      why: "it has no chat template (tokenizer_config.json chat_template or chat_template.jinja)",
      fix: "use an instruct / chat Qwen3 model directory whose tokenizer carries the chat template",
    });
  }
  const tokenizerSha256 = await sha256Hex(await Deno.readFile(join(abs, "tokenizer.json")));
  const chatTemplateSha256 = await sha256Hex(new TextEncoder().encode(hf.chat_template));
  return new ChatTokenizer(hf, { dir: abs, tokenizerSha256, chatTemplateSha256 });
}

/** `AutoTokenizer.from_pretrained(absDir)` with the hub and every cache switched off. */
async function fromPretrained(absDir: string): Promise<HfTokenizer> {
  let mod: typeof import("@huggingface/transformers");
  try {
    mod = await import("@huggingface/transformers");
  } catch (e) {
    throw new UserError("loading transformers.js for the tokenizer", {
      value: (e as Error).message.split("\n")[0],
      why: "its native modules could not load",
      fix: "run with --allow-ffi --allow-env --allow-read (deno task does), after `deno install`",
    });
  }
  const { AutoTokenizer, env } = mod;
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.useFSCache = false;
  env.useBrowserCache = false;
  // An absolute path is not a valid hub id, so transformers.js reads it as is (localModelPath unused).
  return await AutoTokenizer.from_pretrained(absDir, { local_files_only: true }) as unknown as HfTokenizer;
}

async function requireFiles(dir: string): Promise<void> {
  for (const name of TOKENIZER_FILES) {
    try {
      await Deno.stat(join(dir, name));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      throw new UserError(`tokenizer file ${join(dir, name)}`, {
        why: "it does not exist",
        fix: "copy the model's tokenizer.json and tokenizer_config.json into the model directory",
      });
    }
  }
}
