/**
 * The demo's model: a small random-init Qwen3 whose tokenizer is Qwen3's own, pruned to the tokens the
 * demo's texts use (prompts, system prompt, tool list, tool calls, tool results, answers), so the
 * embedding table and the head have hundreds of rows instead of 151,669. The chat template and every
 * added token (`<|im_start|>`, `<think>`, `<tool_call>`, `<tool_response>`…) stay Qwen3's.
 *
 * The directory is built beside its final path and renamed into place, so a directory with a
 * `config.json` is always complete.
 *
 * @module
 */

import { dirname, join, resolve } from "node:path";
import { type OperationStep, operationSteps } from "../data/arithmetic_steps.ts";
import type { Task } from "../data/task.ts";
import type { ChatMessage, ChatTokenizer, ToolSpec } from "../model/chat.ts";
import { bundledQwen3TokenizerDir } from "../model/bundled_tokenizer.ts";
import { pruneTokenizer } from "../model/prune_tokenizer.ts";
import { writeRandomQwen3 } from "../model/random_model.ts";
import { loadTokenizer } from "../model/tokenizer.ts";
import { writeTextAtomic } from "../safetensors/mod.ts";
import { type DemoModelSettings, randomModelOptions } from "./settings.ts";
import { calculatorCallText, finalAnswerText } from "./teacher.ts";

/** The one-operation steps of an arithmetic task (none for a task without an integer expression). */
function stepsOf(task: Task): OperationStep[] {
  const expression = task.meta?.expression;
  return typeof expression === "string" && /^[\d\s()+\-*/]+$/.test(expression)
    ? operationSteps(expression)
    : [];
}

/** What the demo renders, from which the vocabulary is taken. */
export interface DemoCorpus {
  tasks: readonly Task[];
  systemPrompt: string | null;
  tools: ToolSpec[];
  /** Further texts the model should read or write with Qwen3's own tokens (e.g. tool error messages). */
  extraTexts?: readonly string[];
}

/**
 * Every text of the demo: each task's rendered prompt, its traces both ways, its tool result, and the
 * calls and results of its one-operation steps.
 */
export function corpusTexts(tokenizer: ChatTokenizer, c: DemoCorpus): string[] {
  const texts = [...(c.extraTexts ?? [])];
  for (const enableThinking of [false, true]) {
    for (const task of c.tasks) {
      const prompt: ChatMessage[] = [
        ...(c.systemPrompt ? [{ role: "system" as const, content: c.systemPrompt }] : []),
        { role: "user", content: task.prompt },
      ];
      texts.push(tokenizer.renderChat(prompt, { tools: c.tools, enableThinking, addGenerationPrompt: true }));
      texts.push(calculatorCallText(String(task.meta?.expression ?? "")));
      texts.push(tokenizer.toolResultText([task.answer ?? ""], { enableThinking }));
      texts.push(finalAnswerText(task.answer ?? ""), finalAnswerText(`-${task.answer}`));
      for (const step of stepsOf(task)) { // the calls of a calculator limited to one operation per call
        texts.push(calculatorCallText(step.expression), finalAnswerText(step.result));
        texts.push(tokenizer.toolResultText([step.result], { enableThinking }));
      }
    }
  }
  return texts;
}

/** Writes the demo model to `dir` (replacing nothing: `dir` must not exist); returns its vocabulary size. */
export async function buildDemoModel(
  dir: string,
  settings: DemoModelSettings,
  corpus: DemoCorpus,
): Promise<{ dir: string; vocab: number }> {
  const abs = resolve(dir);
  const full = await loadTokenizer(bundledQwen3TokenizerDir());
  const used = new Set(corpusTexts(full, corpus).flatMap((text) => full.encode(text)));
  await Deno.mkdir(dirname(abs), { recursive: true });
  const tmp = await Deno.makeTempDir({ dir: dirname(abs), prefix: ".demo-model-" });
  try {
    const pruned = await pruneTokenizer(bundledQwen3TokenizerDir(), tmp, used);
    await writeRandomQwen3(tmp, randomModelOptions(settings, pruned.size));
    await setSpecialIds(tmp, pruned.bosId, pruned.eosId);
    await Deno.rename(tmp, abs);
    return { dir: abs, vocab: pruned.size };
  } catch (error) {
    await Deno.remove(tmp, { recursive: true }).catch(() => {});
    throw error;
  }
}

/** Rewrites the bos / eos ids of config.json and generation_config.json to the pruned tokenizer's. */
async function setSpecialIds(dir: string, bos: number, eos: number): Promise<void> {
  const edit = async (name: string, ids: Record<string, unknown>) => {
    const path = join(dir, name);
    const json = { ...JSON.parse(await Deno.readTextFile(path)), ...ids };
    await writeTextAtomic(path, JSON.stringify(json, null, 2) + "\n");
  };
  await edit("generation_config.json", { bos_token_id: bos, eos_token_id: [eos, bos], pad_token_id: bos });
  await edit("config.json", { bos_token_id: bos, eos_token_id: eos });
}
