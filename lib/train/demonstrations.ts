/**
 * Demonstrations as a `batch.arrow` for a supervised warm start (`train.loss.objective: sft`): each
 * task's prompt rendered by the chat template, then a given assistant response, trained on the
 * response tokens only. The file is a complete batch file (every rollouts, scored and batch column),
 * so the train stage, notebooks and later stages read it like any other.
 *
 * Token-in-token-out as in rollouts: prompt tokens come from the template with the generation prompt;
 * the response is encoded and closed with the end-of-turn token, exactly what the policy would have to
 * sample. `sampled` marks the response, `logprobs` are 0 (there is no sampling policy), advantages 1.
 *
 * @module
 */

import { listFromArrays } from "../arrow/columns.ts";
import { writeStageFile } from "../arrow/write.ts";
import type { ChatMessage, ChatTokenizer } from "../model/chat.ts";
import type { Task } from "../data/task.ts";

/** One demonstration. */
export interface Demonstration {
  task: Task;
  /** The assistant's reply, as text (thinking included when the template expects it). */
  response: string;
}

/** How to render the prompts. */
export interface DemonstrationOptions {
  systemPrompt: string | null;
  enableThinking: boolean;
  /** Recorded in the file's metadata. */
  configHash: string;
  model: string;
}

/** Writes `demos` as a batch file at `path`. */
export async function writeDemonstrationBatch(
  path: string,
  demos: readonly Demonstration[],
  tokenizer: ChatTokenizer,
  o: DemonstrationOptions,
): Promise<void> {
  const rows = demos.map((d) => encodeDemonstration(d, tokenizer, o));
  const ints = (f: (r: typeof rows[number], i: number) => number) => Int32Array.from(rows, f);
  const n = rows.length;
  await writeStageFile(path, "batch", {
    episode_id: demos.map((d) => `demo-${d.task.id}`),
    task_id: demos.map((d) => d.task.id),
    group_id: ints((_, i) => i),
    sample_idx: new Int32Array(n),
    task: demos.map((d) => JSON.stringify(d.task)),
    prompt_messages: rows.map((r) => JSON.stringify(r.prompt)),
    messages: rows.map((r) => JSON.stringify(r.messages)),
    tokens: listFromArrays(rows.map((r) => r.tokens)),
    prompt_len: ints((r) => r.promptLen),
    sampled: listFromArrays(rows.map((r) => r.response)),
    logprobs: listFromArrays(rows.map((r) => new Float32Array(r.tokens.length))),
    turn_idx: listFromArrays(rows.map((r) => Int16Array.from(r.response))),
    tool_calls: rows.map(() => []),
    num_turns: Int16Array.from(rows, () => 1),
    finish_reason: rows.map(() => "stop"),
    status: rows.map(() => "ok"),
    policy_version: rows.map(() => "demonstration"),
    reward: new Float32Array(n).fill(1),
    turn_rewards: listFromArrays(rows.map(() => new Float32Array(0))),
    correct: rows.map(() => true),
    loss_mask: listFromArrays(rows.map((r) => r.response)),
    advantages: listFromArrays(rows.map((r) => Float32Array.from(r.response))),
  }, {
    config_hash: o.configHash,
    input_hashes: {},
    model: o.model,
    adapter: "",
    tokenizer_hash: tokenizer.info.tokenizerSha256,
    chat_template_hash: tokenizer.info.chatTemplateSha256,
    sampling: { temperature: 1, source: "demonstrations" },
    seed: 0,
  });
}

function encodeDemonstration(d: Demonstration, tokenizer: ChatTokenizer, o: DemonstrationOptions) {
  const prompt: ChatMessage[] = [
    ...(o.systemPrompt ? [{ role: "system" as const, content: o.systemPrompt }] : []),
    { role: "user", content: d.task.prompt },
  ];
  const promptTokens = tokenizer.renderChatTokens(prompt, {
    addGenerationPrompt: true,
    enableThinking: o.enableThinking,
  });
  const answer = [...tokenizer.encode(d.response), tokenizer.eosTokenId];
  const tokens = Int32Array.from([...promptTokens, ...answer]);
  return {
    prompt,
    messages: [...prompt, { role: "assistant", content: d.response }],
    tokens,
    promptLen: promptTokens.length,
    response: Uint8Array.from(tokens, (_, t) => (t >= promptTokens.length ? 1 : 0)),
  };
}
