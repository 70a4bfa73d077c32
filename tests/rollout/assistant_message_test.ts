/**
 * `messages` in OpenAI's convention (lib/rollout/assistant_message.ts): reasoning as `reasoning_content`,
 * calls only in `tool_calls`; a multi-turn rollout file's `messages` re-rendered through the model's chat
 * template write each call once and give back the episode's own tokens.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { loadConfig } from "../../lib/config/mod.ts";
import { readStageFile } from "../../lib/arrow/read.ts";
import type { Task } from "../../lib/data/task.ts";
import type { ChatMessage, ToolCall } from "../../lib/model/chat.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { openSession, rollout, writeStageOutput } from "../../lib/pipeline/mod.ts";
import { turnMessage, turnText } from "../../lib/rollout/assistant_message.ts";
import { formatStatus } from "../../lib/score/format.ts";
import { loadTools, toolSpecs } from "../../lib/tools/registry.ts";
import { makeTinyModel } from "../helpers/tiny_model.ts";
import { ScriptedPolicy } from "../helpers/scripted_policy.ts";

const CALL = (expr: string) =>
  `<tool_call>\n{"name": "calculator", "arguments": {"expression": "${expr}"}}\n</tool_call>`;
const CALLED = (expr: string): ToolCall => ({
  type: "function",
  function: { name: "calculator", arguments: { expression: expr } },
});

Deno.test("turnMessage: the <think> block as reasoning_content, the called blocks out of content", () => {
  const text = `<think>\nplan\n</think>\n\nLet me compute.\n${CALL("2+2")}`;
  assert.deepEqual(turnMessage(text, [CALLED("2+2")]), {
    role: "assistant",
    content: "Let me compute.",
    reasoning_content: "\nplan\n",
    tool_calls: [CALLED("2+2")],
  });
  // Without calls in tool_calls, the blocks stay (nothing was moved anywhere).
  assert.equal(turnMessage(text).content, `\n\nLet me compute.\n${CALL("2+2")}`);
});

Deno.test("turnMessage keeps what a reward must see: a broken block, an unclosed or misplaced <think>", () => {
  const broken = '<tool_call>\n{"name": "calculator"}\n</tool_call>';
  const m = turnMessage(`<think>x</think>${CALL("1")}\n${broken}`, [CALLED("1")]);
  assert.equal(m.content, broken);
  assert.equal(formatStatus([turnText(m)], "stop"), "bad_tool_call");
  const unclosed = turnMessage("<think>cut here");
  assert.deepEqual(unclosed, { role: "assistant", content: "<think>cut here" });
  assert.equal(formatStatus([turnText(unclosed)], "length"), "truncated");
  // A turn cut by max_total_tokens ends the episode `truncated`: cut too, however its text reads.
  const cut = turnMessage("<think>x</think>Let me compute: 3*14 = 42 so the");
  assert.equal(formatStatus([turnText(cut)], "stop"), "ok");
  assert.equal(formatStatus([turnText(cut)], "truncated"), "truncated");
  assert.equal(formatStatus([turnText(turnMessage("hi <think>a</think>b"))], "stop"), "bad_think");
  const twice = turnMessage("<think>a</think>b</think>Final answer: 1");
  assert.equal(formatStatus([turnText(twice)], "stop"), "bad_think");
  assert.equal(
    turnText(turnMessage("<think>a</think>\n\nFinal answer: 4")),
    "<think>a</think>\n\nFinal answer: 4",
  );
});

Deno.test("a multi-turn rollout file's messages re-render through the chat template to its own tokens, each call once", async () => {
  const dir = await makeTinyModel();
  const tokenizer = await loadTokenizer(dir);
  const { config } = await loadConfig({
    overrides: [
      ["rollout.group_size", "2"],
      ["rollout.generation.max_new_tokens", "128"],
      ["rollout.generation.max_total_tokens", "1024"],
      ["rollout.generation.enable_thinking", "true"],
      ["rollout.tools.enabled", "[calculator]"],
    ],
  });
  const think = "<think>\nI should use the calculator.\n</think>\n\n";
  const script = ["1234 * 5678", "7006652 + 0"];
  const policy = new ScriptedPolicy(
    tokenizer,
    (_, turn) => turn <= 2 ? `${think}${CALL(script[turn - 1])}` : `${think}Final answer: 7006652`,
  );
  const session = openSession(config, "test", { open: { policy, tokenizer }, showProgress: false });
  const task: Task = { id: "t0", source: "arithmetic", prompt: "Compute 1234 * 5678.", answer: "7006652" };
  const out = await rollout(session, [task], { step: 0 });
  const path = join(await Deno.makeTempDir(), "rollouts.arrow");
  await writeStageOutput(path, out);
  const file = await readStageFile(path, "rollouts");
  const messages = file.json("messages", 0) as ChatMessage[];
  const tokens = Array.from(file.listAt<Int32Array>("tokens", 0));
  const tools = toolSpecs([...(await loadTools(config.rollout.tools)).values()]);
  const rendered = tokenizer.renderChat(messages, { tools, enableThinking: true });
  const calls = (s: string) => s.split('<tool_call>\n{"name": "calculator"').length - 1;
  assert.equal(messages.filter((m) => m.tool_calls).length, 2);
  assert.ok(messages.every((m) => !m.content.includes("<tool_call>")), "no call markup in content");
  assert.equal(calls(rendered), 2, "each call rendered once");
  // Every turn follows the last user query, so Qwen3's template keeps each reasoning_content: the
  // re-render is the episode's own token sequence (plus the newline after the last <|im_end|>).
  assert.equal(rendered, `${tokenizer.decode(tokens)}\n`);
});
