/**
 * A tool-using agent written with the official `openai` client's tool loop (docs/agents.md): ask, run the
 * calls the reply makes, send their results, ask again, until a reply calls nothing. Pointed at the
 * gateway with the episode's headers, its turns are recorded for training; `run` is the form
 * `rollout.environment.kind: agent` drives.
 *
 * @module
 */

import OpenAI from "openai";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import type { Task } from "../../lib/data/task.ts";
import type { AgentClient, AgentResult } from "../../lib/serve/gateway/agent.ts";
import { calculate, CALCULATOR, MAX_STEPS, rewardOf, SYSTEM_PROMPT } from "./calculator.ts";

/** One request of the loop: what every call sends besides the growing conversation. */
export interface LoopRequest {
  model: string;
  tools: ChatCompletionTool[];
  seed?: number;
  max_tokens?: number;
}

/**
 * The tool loop: appends each reply and the results of its calls to `messages` until a reply calls no
 * tool or `maxSteps` replies were asked for; returns the last reply's text.
 */
export async function toolLoop(
  openai: OpenAI,
  request: LoopRequest,
  messages: ChatCompletionMessageParam[],
  runTool: (name: string, args: string) => Promise<string>,
  headers: Record<string, string>,
  maxSteps = MAX_STEPS,
): Promise<string> {
  for (let step = 0; step < maxSteps; step++) {
    const reply = await openai.chat.completions.create({ ...request, messages }, { headers });
    const message = reply.choices[0].message;
    messages.push(message);
    if (!message.tool_calls?.length) return message.content ?? "";
    for (const call of message.tool_calls) {
      const output = call.type === "function"
        ? await runTool(call.function.name, call.function.arguments)
        : `Error: unknown tool type ${call.type}`;
      messages.push({ role: "tool", tool_call_id: call.id, content: output });
    }
  }
  return "";
}

/** The calculator agent: one episode of `task` through `client`; its reward is its answer's correctness. */
export async function run(task: Task, client: AgentClient): Promise<AgentResult> {
  const openai = new OpenAI({ baseURL: client.baseURL, apiKey: client.apiKey, maxRetries: 0 });
  const tools: ChatCompletionTool[] = [{ type: "function", function: { ...CALCULATOR } }];
  const reply = await toolLoop(
    openai,
    { model: client.model, tools, seed: client.seed },
    [{ role: "system", content: SYSTEM_PROMPT }, { role: "user", content: task.prompt }],
    (name, args) =>
      Promise.resolve(name === CALCULATOR.name ? calculatorCall(args) : `Error: no tool ${name}`),
    client.headers,
  );
  return { reward: rewardOf(reply, task.answer) };
}

function calculatorCall(args: string): string {
  try {
    return calculate(String(JSON.parse(args).expression));
  } catch (e) {
    if (e instanceof SyntaxError) return `Error: the arguments are not JSON: ${e.message}`;
    throw e;
  }
}
