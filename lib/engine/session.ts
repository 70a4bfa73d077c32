/**
 * onnxruntime sessions for the graphs the engine builds: execution provider, threads, and the folder
 * external weights are read from.
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import { UserError } from "../errors.ts";

/** Execution providers the engine can ask for. */
export const EXECUTION_PROVIDERS = ["cpu", "webgpu", "cuda"] as const;
export type ExecutionProvider = typeof EXECUTION_PROVIDERS[number];

/** How to run a graph. */
export interface SessionOptions {
  ep?: ExecutionProvider;
  /** Intra-op threads; 0 or absent lets onnxruntime choose (one per core). */
  threads?: number;
}

/** Creates a session for model bytes whose external weights live below `externalFolder`. */
export async function createSession(
  bytes: Uint8Array,
  externalFolder: string,
  options: SessionOptions = {},
): Promise<ort.InferenceSession> {
  const ep = options.ep ?? "cpu";
  const sessionOptions: ort.InferenceSession.SessionOptions = {
    executionProviders: [ep],
    graphOptimizationLevel: (Deno.env.get("DENO_RL_ORT_OPT") ?? "all") as "all",
    interOpNumThreads: 1,
    extra: { session: { model_external_initializers_file_folder_path: externalFolder } },
  };
  if (options.threads && options.threads > 0) sessionOptions.intraOpNumThreads = options.threads;
  const extra = Deno.env.get("DENO_RL_ORT_CONFIG"); // experiments: "key=value,key=value" session config entries
  for (const kv of extra ? extra.split(",") : []) {
    const [k, v] = kv.split("=");
    (sessionOptions.extra as { session: Record<string, string> }).session[k] = v;
  }
  const profile = Deno.env.get("DENO_RL_ORT_PROFILE"); // a file prefix: per-node timings for diagnosis
  if (profile) Object.assign(sessionOptions, { enableProfiling: true, profileFilePrefix: profile });
  try {
    return await ort.InferenceSession.create(bytes, sessionOptions);
  } catch (e) {
    const message = (e as Error).message.split("\n")[0];
    if (ep !== "cpu") {
      throw new UserError(`onnxruntime execution provider ${ep}`, {
        value: message,
        why: "it could not start a session (no silent fallback to CPU)",
        fix: ep === "cuda"
          ? "install onnxruntime-node's CUDA libraries, or use model.ep=cpu"
          : "install a Vulkan driver for WebGPU, or use model.ep=cpu",
      });
    }
    throw e;
  }
}
