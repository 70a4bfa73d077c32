/**
 * The calculator agent written with the Vercel AI SDK (`ai` and `@ai-sdk/openai-compatible`): one
 * `generateText` with a tool the SDK runs and a step limit (docs/agents.md). Pointed at the gateway with
 * the episode's headers, its turns are recorded for training.
 *
 * @module
 */

import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";
import type { Task } from "../../lib/data/task.ts";
import type { AgentClient, AgentResult } from "../../lib/serve/gateway/agent.ts";
import { calculate, CALCULATOR, MAX_STEPS, rewardOf, SYSTEM_PROMPT } from "./calculator.ts";

export async function run(task: Task, client: AgentClient): Promise<AgentResult> {
  const provider = createOpenAICompatible({
    name: "gateway",
    baseURL: client.baseURL,
    apiKey: client.apiKey,
    headers: client.headers,
  });
  const calculator = tool({
    description: CALCULATOR.description,
    inputSchema: jsonSchema<{ expression: string }>(CALCULATOR.parameters),
    execute: ({ expression }) => Promise.resolve(calculate(expression)),
  });
  const result = await generateText({
    model: provider.chatModel(client.model),
    system: SYSTEM_PROMPT,
    messages: [{ role: "user", content: task.prompt }],
    tools: { calculator },
    stopWhen: stepCountIs(MAX_STEPS),
    seed: client.seed,
    maxRetries: 0,
  });
  return { reward: rewardOf(result.text, task.answer) };
}
