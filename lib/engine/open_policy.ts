/**
 * The policy `model.backend` names: the engine on this machine (`loadPolicy`), or `ServerPolicy` on
 * the servers of `model.server` (docs/serving.md). Stages that sample call this instead of
 * `loadPolicy` so that one config key moves their rollouts to servers.
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { mergeAdapterOf, providerOptionsOf } from "../config/sections/model.ts";
import type { Policy } from "./policy.ts";
import { loadPolicy, type LoadPolicyOptions } from "./worker_policy.ts";
import { ServerPolicy } from "./remote/server_policy.ts";

/** Opens the policy of `model` (its path, adapter, backend and servers); `local` takes `options`. */
export async function openPolicy(model: Config["model"], options: LoadPolicyOptions = {}): Promise<Policy> {
  if (model.backend === "local") {
    return await loadPolicy(model.path, {
      adapter: model.adapter,
      ep: model.ep,
      providerOptions: providerOptionsOf(model),
      decodeGraph: model.webgpu.decode_graph,
      graphCapture: model.webgpu.graph_capture,
      compute: model.compute_dtype,
      mergeAdapter: mergeAdapterOf(model),
      threads: model.threads,
      ...options,
    });
  }
  const s = model.server;
  return await ServerPolicy.connect({
    backend: model.backend,
    urls: s.urls,
    modelDir: model.path,
    modelName: s.model_name,
    apiKey: s.api_key,
    requestTimeoutS: s.request_timeout_s,
    retries: s.retries,
    backoffS: s.backoff_s,
    healthTimeoutS: s.health_timeout_s,
    adapterName: s.adapter_name,
    adapterDir: s.adapter_dir,
    adapter: model.adapter,
  });
}
