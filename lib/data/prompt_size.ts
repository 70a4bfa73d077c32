/**
 * The size cap of one prompt: a task's prompt and `data.system_prompt` are at most `PROMPT_MAX_BYTES`
 * of UTF-8, checked when tasks are loaded, before any tokenizer sees them. Tokenizing grows with the
 * text (1 MiB is about 500,000 Qwen3 tokens in some 1.5 s) and a 50 MB prompt crashed Deno (exit 133,
 * issue 32). No prompt near the cap can be used anyway: Qwen3's longest context, 131,072 positions
 * with YaRN, holds some 512 KiB of text.
 *
 * @module
 */
import { UserError } from "../errors.ts";

/** 1 MiB of UTF-8 text, twice what Qwen3's longest context holds. */
export const PROMPT_MAX_BYTES = 1024 * 1024;

/** The UTF-8 size of `text`, counted without encoding when it is surely under `bound`. */
function utf8Bytes(text: string, bound: number): number {
  // A UTF-16 code unit is at most 3 UTF-8 bytes.
  if (text.length * 3 <= bound) return text.length * 3;
  return new TextEncoder().encode(text).length;
}

/** Refuses `text` (named by `what`, e.g. `data.path "x.jsonl": task "t1": prompt`) past the cap. */
export function checkPromptSize(what: string, text: string, fix: string): void {
  const bytes = utf8Bytes(text, PROMPT_MAX_BYTES);
  if (bytes <= PROMPT_MAX_BYTES) return;
  throw new UserError(what, {
    why: `it is ${bytes} bytes of UTF-8 and a prompt is at most ${PROMPT_MAX_BYTES} bytes (1 MiB), more ` +
      "than any Qwen3 context holds (tokenizing a 50 MB prompt crashed the process)",
    fix,
  });
}
