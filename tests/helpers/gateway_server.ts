/**
 * The gateway (`deno task serve --record DIR`, lib/serve/gateway/) on the tiny model for tests: a server
 * with a recorder writing to a temporary directory, the official `openai` client pointed at it, and a
 * scripted tool-calling policy (two calculator calls, then the answer) for agents that need calls.
 *
 * @module
 */

import OpenAI from "openai";
import { loadConfig } from "../../lib/config/mod.ts";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import type { ChatTokenizer } from "../../lib/model/chat.ts";
import { loadTokenizer } from "../../lib/model/tokenizer.ts";
import { Recorder } from "../../lib/serve/gateway/recorder.ts";
import { startServer } from "../../lib/serve/serve.ts";
import { ScriptedPolicy } from "./scripted_policy.ts";
import { makeTinyModel } from "./tiny_model.ts";

/** The scripted environment's rollout settings, small enough for the tiny model. */
export const SCRIPTED_ENV: Array<[string, string]> = [
  ["rollout.group_size", "2"],
  ["rollout.environment.kind", "scripted"],
  ["rollout.environment.max_turns", "3"],
  ["rollout.generation.max_new_tokens", "6"],
  ["rollout.generation.max_total_tokens", "512"],
  ["rollout.generation.enable_thinking", "false"],
  ["rollout.tools.enabled", "[]"],
  ["data.system_prompt", "null"],
];

/** A gateway recording into a temporary directory (`record`), its policy, config and client. */
export async function gatewayServer(
  overrides = SCRIPTED_ENV,
  policyOf: (tokenizer: ChatTokenizer, dir: string) => Promise<Policy> = (_, dir) =>
    LocalPolicy.load(dir, { maxSequences: 8 }),
) {
  const dir = await makeTinyModel();
  const tokenizer = await loadTokenizer(dir);
  const policy = await policyOf(tokenizer, dir);
  const { config, hash } = await loadConfig({ overrides });
  const record = await Deno.makeTempDir({ prefix: "gateway-" });
  const server = await startServer(policy, {
    modelDir: dir,
    port: 0,
    adapterRoot: record,
    maxModelLen: 512,
    modelName: "tiny",
    recorder: (tok, maxModelLen) =>
      new Recorder({ dir: record, tokenizer: tok, model: dir, configHash: hash ?? "test", maxModelLen }),
  });
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  const end = async (id: string, reward?: number) =>
    await (await fetch(`${server.url}/v1/episodes/${encodeURIComponent(id)}/end`, {
      method: "POST",
      body: JSON.stringify(reward === undefined ? {} : { reward }),
    })).json();
  const close = async () => {
    await server.close();
    await policy.close();
  };
  return { policy, tokenizer, config, client, end, close, record, url: server.url };
}

/** A running gateway of `gatewayServer`. */
export type GatewayServer = Awaited<ReturnType<typeof gatewayServer>>;

const THINK = "<think>\nI should use the calculator.\n</think>\n\n";
const CALL = (expr: string) =>
  `<tool_call>\n{"name": "calculator", "arguments": {"expression": "${expr}"}}\n</tool_call>`;

/**
 * Two calls, then the answer. The turn is read from the context (its `<tool_response>` blocks), since the
 * rollout asks one sequence turn after turn and the gateway opens one per request.
 */
export function calculatorAgent(tokenizer: ChatTokenizer) {
  const script = [
    `${THINK}${CALL("1234 * 5678")}`,
    `${THINK}${CALL("7006652 + 0")}`,
    `${THINK}Final answer: 7006652`,
  ];
  return new ScriptedPolicy(tokenizer, (prompt, turn) => {
    const answered = prompt.filter((t) => t === tokenizer.special.toolResponse).length;
    return script[Math.min(script.length - 1, answered + turn - 1)];
  });
}
