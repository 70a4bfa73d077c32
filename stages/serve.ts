/**
 * `deno task serve [--port N] [--host H] [--api-key K] [--record DIR [--overwrite]]`: the policy
 * (`model.path` plus an optional `model.adapter`) behind vLLM's HTTP API subset, so a trained adapter can
 * be tried from any OpenAI client and `model.backend: vllm` can point at it (docs/serving.md); with
 * `--record`, the chat turns of the episodes clients name are recorded for training (docs/agents.md).
 *
 * The stage is a function (`serve`) plus a thin `main`; it runs until interrupted.
 */
import { loadPolicy } from "../lib/engine/worker_policy.ts";
import { mergeAdapterOf, providerOptionsOf } from "../lib/config/sections/model.ts";
import { checkAdapterRoot, checkExposure, checkPortFree, startServer } from "../lib/serve/serve.ts";
import { progress, runStageMain, type StageArgs } from "../lib/cli/cli.ts";
import { join } from "node:path";
import { UserError } from "../lib/errors.ts";
import { checkOutputPath, createOutputParents } from "../lib/fs/output.ts";
import type { ChatTokenizer } from "../lib/model/chat.ts";
import { Recorder } from "../lib/serve/gateway/recorder.ts";

/** Loads the policy and serves it until the process is stopped. */
export async function serve(args: StageArgs): Promise<void> {
  const { model, serve: options } = args.config;
  const apiKey = options.api_key ?? Deno.env.get("DENO_RL_API_KEY") ?? null;
  checkExposure(options.host, apiKey);
  checkPortFree(options.host, options.port);
  const recorder = await recordFlag(args, model.path);
  if (!await checkAdapterRoot(options.adapter_root)) {
    progress.log(
      `serve: serve.adapter_root ${options.adapter_root} does not exist yet; adapters load once it does`,
    );
  }
  const policy = await loadPolicy(model.path, {
    adapter: model.adapter,
    ep: model.ep,
    providerOptions: providerOptionsOf(model),
    compute: model.compute_dtype,
    mergeAdapter: mergeAdapterOf(model),
    threads: model.threads,
    maxSequences: options.max_sequences,
  });
  try {
    const server = await startServer(policy, {
      modelDir: model.path,
      host: options.host,
      port: options.port,
      apiKey,
      adapterRoot: options.adapter_root,
      modelName: options.model_name,
      maxModelLen: options.max_model_len,
      maxBodyBytes: options.max_body_bytes,
      recorder,
    });
    console.log(`serve: ${model.path} at ${server.url} (Ctrl-C to stop)`);
    await server.finished;
  } finally {
    await policy.close();
  }
}

/**
 * `--record DIR`: the gateway's recorder (docs/agents.md), or none. `DIR/rollouts.arrow` is checked as
 * any stage output before the model loads: a file of an earlier run is never replaced.
 */
async function recordFlag(args: StageArgs, model: string) {
  const dir = args.flags.record;
  if (dir === undefined) return undefined;
  if (typeof dir !== "string" || dir === "") {
    throw new UserError("--record", {
      value: String(dir),
      why: "it needs a directory",
      fix: "pass --record DIR",
    });
  }
  const file = join(dir, "rollouts.arrow");
  await checkOutputPath(file, { kind: "stage-file", fileKind: "rollouts" }, {
    flag: "--record",
    inputs: [model],
    overwrite: args.overwrite,
  });
  await createOutputParents(file);
  return (tokenizer: ChatTokenizer, maxModelLen: number) =>
    new Recorder({ dir, tokenizer, model, configHash: args.configHash, maxModelLen });
}

if (import.meta.main) {
  await runStageMain({
    name: "serve",
    summary: "Serves the policy behind vLLM's HTTP API (completions with token ids and log-probs, chat " +
      "with tool calls, LoRA hot-loading) until interrupted.",
    usesModel: true,
    configFlags: {
      port: "serve.port",
      host: "serve.host",
      "api-key": "serve.api_key",
      adapter: "model.adapter",
    },
    stringFlags: ["record"],
    takesOverwrite: true,
    flagHelp: [
      "--record DIR     record chat turns of requests naming an episode (x-episode-id) into DIR/rollouts.arrow",
      "--port N         TCP port (serve.port, default 8000)",
      "--host H         address to bind (serve.host, default 127.0.0.1); another address needs --api-key",
      "--api-key K      Bearer key clients must send (serve.api_key); better, set the DENO_RL_API_KEY",
      "                 environment variable: a flag is echoed by deno task and visible to others in ps",
    ],
    examples: [
      "deno task serve --port 8000",
      "DENO_RL_API_KEY=secret deno task serve --host 0.0.0.0 --serve.adapter_root=runs",
    ],
    run: serve,
  });
}
