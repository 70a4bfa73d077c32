/**
 * `deno task serve`'s server on the tiny model with the official `openai` npm client pointed at it, for
 * the tests that speak to it as users' code does.
 *
 * @module
 */

import OpenAI from "openai";
import { LocalPolicy } from "../../lib/engine/local_policy.ts";
import { type RunningServer, startServer } from "../../lib/serve/serve.ts";
import type { Policy } from "../../lib/engine/policy.ts";
import { makeTinyModel } from "./tiny_model.ts";

/** The server, its policy and a client; `close` stops all three. */
export interface OpenAiServer {
  server: RunningServer;
  policy: Policy;
  client: OpenAI;
  /** The served model's name. */
  model: string;
  close(): Promise<void>;
}

export async function openAiServer(policy?: Policy): Promise<OpenAiServer> {
  const modelDir = await makeTinyModel();
  const served = policy ?? await LocalPolicy.load(modelDir, { maxSequences: 8 });
  const root = await Deno.makeTempDir({ prefix: "serve-openai-" });
  const server = await startServer(served, {
    modelDir,
    port: 0,
    adapterRoot: root,
    maxModelLen: 512,
    modelName: "tiny",
  });
  const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0 });
  return {
    server,
    policy: served,
    client,
    model: "tiny",
    async close() {
      await server.close();
      await served.close();
      await Deno.remove(root, { recursive: true });
    },
  };
}

/** A request body with parameters the client's types do not list (vLLM's). */
// deno-lint-ignore no-explicit-any
export type Loose = any;
