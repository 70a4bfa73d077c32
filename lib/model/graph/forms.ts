/**
 * The forms a graph takes for one execution provider and compute dtype, decided in one place. The CPU
 * provider runs every op we emit; a GPU provider lacks some kernels, and onnxruntime then runs those
 * nodes on the CPU with a copy of their inputs and outputs across the bus, inside every run (a silent
 * fallback per node). The portable forms below keep the decode step and the train step on the device
 * (measured with onnxruntime 1.30.0 by profiling which provider ran each node; docs/ENGINE_FACTS.md,
 * "The GPU path"):
 *
 * - log-softmax: WebGPU has no LogSoftmax kernel; `x - ReduceLogSumExp(x)` instead (CPU and CUDA keep
 *   the fused kernel).
 * - the chunked head: WebGPU has no Loop kernel (CUDA and CPU have one), so on WebGPU the head runs in one
 *   pass over all its rows: `[rows, vocab]` logits exist at once, bounded by the scoring token budget and
 *   `train.micro_batch_tokens`.
 * - gradient sums: WebGPU has no Sum kernel; autodiff adds contributions with a chain of Adds (the same
 *   additions in the same order, so the same bits on CPU).
 * - norm statistics: the CPU provider's fused RMSNorm kernels write their optional `inv_std_var` output,
 *   which the backward reads; WebGPU's do not write it, so there the backward computes it again.
 * - q/k norms inside attention: WebGPU's GroupQueryAttention applies q's and k's per-head RMSNorm itself
 *   (its `q_norm_weight` / `k_norm_weight` inputs), two norm kernels and four Reshapes a layer fewer in
 *   every inference step; the CPU's refuses those inputs, so there the norms run before it.
 *
 * Forms that are portable everywhere at no cost are not switched here but written once: float32 index
 * arithmetic in the sampler (head.ts), a float32 Range for the causal mask (train/attention.ts), nested
 * Ifs on host inputs instead of `And` (infer_graph.ts).
 *
 * @module
 */

import type { ExecutionProvider } from "../../ort/providers.ts";
import { type LogSoftmaxFn, logSoftmaxFor } from "./head.ts";

/** The dtype of weights and activations (the loss, log-probs and LoRA tensors stay float32). */
export const COMPUTE_DTYPES = ["float32", "float16"] as const;
export type ComputeDtype = typeof COMPUTE_DTYPES[number];

/** How a graph is written for one provider. */
export interface GraphForms {
  ep: ExecutionProvider;
  compute: ComputeDtype;
  logSoftmax: LogSoftmaxFn;
  /** The head runs in chunks inside an ONNX Loop (false: one pass over all rows). */
  chunkedHead: boolean;
  /** How autodiff adds several gradient contributions to one value. */
  gradientSum: "Sum" | "Add";
  /**
   * The provider writes the fused norms' optional `inv_std_var` output, so their gradient rules read it
   * instead of computing it again (lib/onnx/ops_norm.ts): the CPU provider does, WebGPU's kernels do not.
   */
  normStats: boolean;
  /** GroupQueryAttention applies the q/k per-head norms itself (the inference graphs; ops_contrib.ts). */
  attentionNorms: boolean;
}

/** The forms for `ep` computing in `compute`. */
export function graphForms(ep: ExecutionProvider = "cpu", compute: ComputeDtype = "float32"): GraphForms {
  const webgpu = ep === "webgpu";
  return {
    ep,
    compute,
    logSoftmax: logSoftmaxFor(ep),
    chunkedHead: !webgpu,
    gradientSum: webgpu ? "Add" : "Sum",
    normStats: ep === "cpu",
    attentionNorms: webgpu,
  };
}

/**
 * How far a GPU provider's results may lie from the CPU provider's float32 ones: log-probs in absolute
 * terms, LoRA gradients relative to each tensor's largest entry. float32 differs only in summation order
 * (measured ≤ 3e-6 and ≤ 3e-6 relative on WebGPU); float16 rounds every weight and activation to 11 bits
 * (measured up to 9e-3 and 1.7e-2 on the test models, growing with width and depth). Checked by
 * tests/engine/webgpu_test.ts; measurements in docs/ENGINE_FACTS.md, "The GPU path".
 */
export const PARITY_TOLERANCE: Record<ComputeDtype, { logprob: number; gradient: number }> = {
  float32: { logprob: 1e-3, gradient: 1e-3 },
  float16: { logprob: 3e-2, gradient: 5e-2 },
};
