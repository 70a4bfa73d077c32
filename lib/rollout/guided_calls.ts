/**
 * The guide of guided tool calls (`rollout.generation.guided_tool_calls`, lib/engine/tool_call_guide.ts)
 * for a tokenizer and the tools offered: each token id's text, and each tool's properties from its JSON
 * schema. A property is guided when its schema gives one of `string`, `number`, `integer`, `boolean` (or
 * a string `enum`); a tool with any other property is guided up to its name only.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { ChatTokenizer, ToolSpec } from "../model/chat.ts";
import type { GuidedParam, GuidedTool, ToolCallGuide } from "../engine/tool_call_guide.ts";

const texts = new WeakMap<ChatTokenizer, Map<number, (string | null)[]>>();

/** The guide for `specs` under `tokenizer`, over a vocabulary of `vocabSize` ids (the model's). */
export function toolCallGuide(
  tokenizer: ChatTokenizer,
  specs: readonly ToolSpec[],
  vocabSize: number,
): ToolCallGuide {
  const tools = specs.map(guidedTool);
  const s = tokenizer.special;
  const key = createHash("sha256")
    .update(JSON.stringify([tokenizer.info.tokenizerSha256, vocabSize, tools]))
    .digest("hex");
  return {
    key,
    open: s.toolCall,
    close: s.toolCallEnd,
    thinkOpen: s.think,
    thinkClose: s.thinkEnd,
    texts: tokenTexts(tokenizer, vocabSize),
    tools,
  };
}

/** A tool as the guide reads its schema. */
export function guidedTool(spec: ToolSpec): GuidedTool {
  const { name, parameters } = spec.function;
  const properties = (parameters?.properties ?? {}) as Record<string, Record<string, unknown>>;
  const required = new Set((parameters?.required ?? []) as string[]);
  const params: GuidedParam[] = [];
  for (const [key, schema] of Object.entries(properties)) {
    const param = guidedParam(key, schema, required.has(key));
    if (!param) return { name, params: null };
    params.push(param);
  }
  return { name, params };
}

function guidedParam(name: string, schema: Record<string, unknown>, required: boolean): GuidedParam | null {
  const type = schema?.type;
  const values = schema?.enum;
  if (type === "string" && Array.isArray(values) && values.every((v) => typeof v === "string")) {
    return { name, type, required, enum: values as string[] };
  }
  if (values !== undefined) return null;
  if (type === "string" || type === "number" || type === "integer" || type === "boolean") {
    return { name, type, required };
  }
  return null;
}

/**
 * The text of each id below `vocabSize` (cached per tokenizer): null for control tokens (`<|…|>`, the
 * tool-call, tool-response and think tags) and for ids the tokenizer does not have.
 */
function tokenTexts(tokenizer: ChatTokenizer, vocabSize: number): (string | null)[] {
  let bySize = texts.get(tokenizer);
  if (!bySize) texts.set(tokenizer, bySize = new Map());
  let out = bySize.get(vocabSize);
  if (out) return out;
  const control = new Set<number>(Object.values(tokenizer.special));
  out = Array.from({ length: vocabSize }, (_, id) => {
    if (control.has(id)) return null;
    let text: string;
    try {
      text = tokenizer.decode([id]);
    } catch {
      return null;
    }
    return text === "" || /^<\|.*\|>$/.test(text) ? null : text;
  });
  bySize.set(vocabSize, out);
  return out;
}
