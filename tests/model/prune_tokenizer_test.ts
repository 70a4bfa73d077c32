/**
 * The pruned Qwen3 tokenizer: on the demo's texts it gives the same token strings as the full one, its
 * ids decode back to the text, the chat template renders the same conversation, and every added token
 * (chat format, thinking, tool calls) is still a single token.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { generateArithmeticTasks } from "../../lib/data/arithmetic.ts";
import { corpusTexts, type DemoCorpus } from "../../lib/demo/model.ts";
import { bundledQwen3TokenizerDir } from "../../lib/model/bundled_tokenizer.ts";
import type { ChatMessage, ChatTokenizer } from "../../lib/model/chat.ts";
import { pruneTokenizer } from "../../lib/model/prune_tokenizer.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { calculatorTool as calculator } from "../../lib/tools/calculator.ts";
import { toolSpecs } from "../../lib/tools/registry.ts";

const SYSTEM = "Use the calculator. End with: Final answer: <answer>";
const arithmetic = (seed: number, numTasks: number) =>
  generateArithmeticTasks({ numTasks, seed, minOperands: 2, maxOperands: 3, maxValue: 999 });
const corpus = (seed: number, n: number): DemoCorpus => ({
  tasks: arithmetic(seed, n),
  systemPrompt: SYSTEM,
  tools: toolSpecs([calculator]),
});

/** The full tokenizer, and one pruned to the texts of `corpus(0, 40)` in a temporary directory. */
function tokenizers(): Promise<{ full: ChatTokenizer; pruned: ChatTokenizer; size: number }> {
  return shared ??= makeTokenizers();
}
let shared: ReturnType<typeof makeTokenizers> | undefined;

async function makeTokenizers() {
  const full = await loadTokenizer(bundledQwen3TokenizerDir());
  const used = new Set(corpusTexts(full, corpus(0, 40)).flatMap((t) => full.encode(t)));
  const dir = await Deno.makeTempDir();
  const { size } = await pruneTokenizer(bundledQwen3TokenizerDir(), dir, used);
  return { full, pruned: await loadTokenizer(dir), size };
}

const strings = (t: ChatTokenizer, text: string) => t.encode(text).map((id) => t.decode([id]));

Deno.test("pruneTokenizer keeps a vocabulary of hundreds with every Qwen3 added token", async () => {
  const { full, pruned, size } = await tokenizers();
  assert(size < 1000, `vocabulary ${size}`);
  for (const [key, id] of Object.entries(pruned.special)) {
    assert.deepEqual(pruned.decode([id]), full.decode([full.special[key as keyof typeof full.special]]));
  }
  assert.deepEqual(pruned.decode([pruned.eosTokenId]), "<|im_end|>");
  // Added tokens come last, in Qwen3's order (<|endoftext|> = 151643 first, <|vision_pad|> = 151654).
  assert.deepEqual(pruned.special.endOfText, size - 26);
  assert.deepEqual(pruned.tokenId("<|vision_pad|>") - pruned.special.endOfText, 151654 - 151643);
});

Deno.test("pruneTokenizer gives the full tokenizer's token strings on unseen demo texts, and round-trips", async () => {
  const { full, pruned } = await tokenizers();
  // Other tasks than those pruned on: the same words, other numbers and expressions.
  const texts = corpusTexts(full, corpus(7, 30));
  for (const text of texts) {
    assert.deepEqual(strings(pruned, text), strings(full, text), text);
    assert.deepEqual(pruned.decode(pruned.encode(text)), text);
  }
});

Deno.test("pruneTokenizer keeps the chat template: tool calls and results render identically", async () => {
  const { full, pruned } = await tokenizers();
  const messages: ChatMessage[] = [
    { role: "system", content: SYSTEM },
    { role: "user", content: "Compute 12 * 34. Use the calculator tool." },
    {
      role: "assistant",
      content: "",
      tool_calls: [{
        type: "function",
        function: { name: "calculator", arguments: { expression: "12 * 34" } },
      }],
    },
    { role: "tool", content: "408" },
    { role: "assistant", content: "Final answer: 408" },
  ];
  for (const enableThinking of [false, true]) {
    const o = { tools: toolSpecs([calculator]), enableThinking, addGenerationPrompt: false };
    assert.deepEqual(pruned.renderChat(messages, o), full.renderChat(messages, o));
    assert.deepEqual(
      pruned.renderChatTokens(messages, o).map((id) => pruned.decode([id])),
      full.renderChatTokens(messages, o).map((id) => full.decode([id])),
    );
  }
  assert.deepEqual(
    pruned.toolResultText(["408"], { enableThinking: false }),
    full.toolResultText(["408"], { enableThinking: false }),
  );
});

Deno.test("pruneTokenizer still encodes text outside the corpus, byte by byte at worst", async () => {
  const { pruned } = await tokenizers();
  for (const text of ["Zebra quokka ünïcödé 🦀", "Error: calculator failed: unexpected ')' at 7"]) {
    const ids = pruned.encode(text);
    assert.deepEqual(pruned.decode(ids), text);
  }
});

Deno.test("pruneTokenizer writes files transformers.js loads, with remapped added_tokens_decoder", async () => {
  const full = await loadTokenizer(bundledQwen3TokenizerDir());
  const dir = await Deno.makeTempDir();
  const { size, eosId } = await pruneTokenizer(
    bundledQwen3TokenizerDir(),
    dir,
    full.encode("Final answer: 42"),
  );
  const config = JSON.parse(await Deno.readTextFile(join(dir, "tokenizer_config.json")));
  assert.deepEqual(config.added_tokens_decoder[String(eosId)].content, "<|im_end|>");
  assert.deepEqual(Math.max(...Object.keys(config.added_tokens_decoder).map(Number)), size - 1);
  const tokenizer = JSON.parse(await Deno.readTextFile(join(dir, "tokenizer.json")));
  const vocab = Object.values(tokenizer.model.vocab) as number[];
  assert.deepEqual(vocab.sort((a, b) => a - b), vocab.map((_, i) => i), "dense ids from 0");
});
