/**
 * Prunes a byte-level BPE tokenizer (Qwen3's `tokenizer.json`) to the tokens a corpus needs, so a
 * small model's embedding table and head cost hundreds of rows instead of 151,669.
 *
 * What is kept (docs/demo.md "The pruned tokenizer"):
 * - every token the full tokenizer produces on the corpus texts;
 * - the 256 single-byte tokens, so any text still encodes (into smaller pieces than with the full
 *   tokenizer) and any id sequence still decodes;
 * - the closure under merges: for a merge `a b → ab` with `ab` kept, `a` and `b` are kept too;
 * - every added token (`<|im_start|>`, `<think>`, `<tool_call>`, …), unchanged, after the regular ones.
 *
 * Merges are kept when both parts and their result are kept, in their original order. On a corpus
 * word BPE then merges exactly as before: every merge the full tokenizer applies to it builds a kept
 * token, so it is kept, and it stays the lowest-ranked applicable one (the pruned merges are a subset).
 *
 * Ids are remapped densely: kept regular tokens in their original id order from 0, then the added
 * tokens in their original order. Normalizer, pre-tokenizer, decoder and the chat template are copied
 * as they are.
 *
 * @module
 */

import { join } from "node:path";
import { writeTextAtomic } from "../safetensors/mod.ts";

/** The parts of a Hugging Face `tokenizer.json` the pruning reads and rewrites. */
interface TokenizerJson {
  added_tokens: Array<{ id: number; content: string } & Record<string, unknown>>;
  model: { type: string; vocab: Record<string, number>; merges: Array<string | [string, string]> };
  [key: string]: unknown;
}

/** What `pruneTokenizer` wrote. */
export interface PrunedTokenizer {
  /** Regular + added tokens: the model's vocabulary size. */
  size: number;
  /** Old id → new id of every kept token. */
  idMap: Map<number, number>;
  /** New ids of `<|endoftext|>` and `<|im_end|>` (the model config's bos / eos). */
  bosId: number;
  eosId: number;
}

/**
 * Writes `tokenizer.json` and `tokenizer_config.json` into `outDir`: the tokenizer of `srcDir` pruned to
 * the tokens with ids `usedIds` (ids of the full tokenizer, e.g. from encoding the corpus with it).
 */
export async function pruneTokenizer(
  srcDir: string,
  outDir: string,
  usedIds: Iterable<number>,
): Promise<PrunedTokenizer> {
  const full = JSON.parse(await Deno.readTextFile(join(srcDir, "tokenizer.json"))) as TokenizerJson;
  const config = JSON.parse(await Deno.readTextFile(join(srcDir, "tokenizer_config.json")));
  if (full.model.type !== "BPE") throw new Error(`pruneTokenizer: ${srcDir} is not a BPE tokenizer`);
  const merges = full.model.merges.map(splitMerge);
  const kept = keptTokens(full, merges, usedIds);
  const { vocab, idMap } = remappedVocab(full, kept);
  const added = full.added_tokens.map((t, i) => {
    const id = Object.keys(vocab).length + i;
    idMap.set(t.id, id);
    return { ...t, id };
  });
  const pruned: TokenizerJson = {
    ...full,
    added_tokens: added,
    model: {
      ...full.model,
      vocab,
      merges: merges.filter(([a, b]) => kept.has(a) && kept.has(b) && kept.has(a + b)),
    },
  };
  config.added_tokens_decoder = remapAddedDecoder(config.added_tokens_decoder ?? {}, idMap);
  await Deno.mkdir(outDir, { recursive: true });
  await writeTextAtomic(join(outDir, "tokenizer.json"), JSON.stringify(pruned));
  await writeTextAtomic(join(outDir, "tokenizer_config.json"), JSON.stringify(config, null, 2) + "\n");
  const idOf = (content: string) => added.find((t) => t.content === content)!.id;
  return {
    size: Object.keys(vocab).length + added.length,
    idMap,
    bosId: idOf("<|endoftext|>"),
    eosId: idOf("<|im_end|>"),
  };
}

/** A merge as its two parts (tokenizer.json stores `"a b"` or `["a", "b"]`). */
function splitMerge(merge: string | [string, string]): [string, string] {
  if (Array.isArray(merge)) return merge;
  const at = merge.indexOf(" ", 1);
  return [merge.slice(0, at), merge.slice(at + 1)];
}

/** Regular-token strings to keep: used ones, the single bytes, and their merge parts (to a fixpoint). */
function keptTokens(full: TokenizerJson, merges: [string, string][], usedIds: Iterable<number>): Set<string> {
  const byId = new Map(Object.entries(full.model.vocab).map(([token, id]) => [id, token]));
  const kept = new Set<string>();
  for (const id of usedIds) {
    const token = byId.get(id);
    if (token !== undefined) kept.add(token); // added tokens are kept separately
  }
  for (const token of Object.keys(full.model.vocab)) {
    if ([...token].length === 1) kept.add(token); // byte-level alphabet: one character per byte
  }
  for (let grew = true; grew;) {
    grew = false;
    for (const [a, b] of merges) {
      if (!kept.has(a + b) || (kept.has(a) && kept.has(b))) continue;
      kept.add(a);
      kept.add(b);
      grew = true;
    }
  }
  return kept;
}

/** The kept regular tokens with dense ids in their original order, and the old → new id map. */
function remappedVocab(full: TokenizerJson, kept: Set<string>) {
  const entries = Object.entries(full.model.vocab)
    .filter(([token]) => kept.has(token))
    .sort((x, y) => x[1] - y[1]);
  const vocab: Record<string, number> = {};
  const idMap = new Map<number, number>();
  entries.forEach(([token, oldId], newId) => {
    vocab[token] = newId;
    idMap.set(oldId, newId);
  });
  return { vocab, idMap };
}

/** tokenizer_config.json's `added_tokens_decoder` (keyed by id strings) under the new ids. */
function remapAddedDecoder(decoder: Record<string, unknown>, idMap: Map<number, number>) {
  const out: Record<string, unknown> = {};
  for (const [id, token] of Object.entries(decoder)) {
    const mapped = idMap.get(Number(id));
    if (mapped !== undefined) out[String(mapped)] = token;
  }
  return out;
}
