/**
 * The options of `loadPolicy` from a configuration: one place, so that the rollout and eval commands and
 * the loop build the same graph. It is always built for adapters of `train.lora`'s shape (fed the base
 * model's when no adapter is set), and takes them merged or not as `model.merge_adapter` says: a graph for
 * no adapter, or the other form, could round differently in the last bit, and a rollout made by hand must
 * give the loop's log-probs exactly.
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
import { mergeAdapterOf, providerOptionsOf } from "../config/sections/model.ts";
import type { LoadPolicyOptions } from "./worker_policy.ts";

export function policyOptionsOf(config: Config, adapter = config.model.adapter): LoadPolicyOptions {
  const { r, alpha, rslora, targets } = config.train.lora;
  return {
    adapter,
    lora: { r, alpha, rslora, targets: [...targets] },
    ep: config.model.ep,
    providerOptions: providerOptionsOf(config.model),
    decodeGraph: config.model.webgpu.decode_graph,
    graphCapture: config.model.webgpu.graph_capture,
    compute: config.model.compute_dtype,
    mergeAdapter: mergeAdapterOf(config.model),
    threads: config.model.threads,
    maxSequences: config.rollout.max_batch,
  };
}
