/**
 * The inference graph: one ONNX model for prefill, decode, continuation and scoring, so a policy keeps
 * one float32 copy of its weights (a second session would fold a second copy).
 *
 * Attention is `com.microsoft.GroupQueryAttention` with RoPE inside and a KV cache that the caller
 * allocates once per batch (`[B, nKV, M, D]` per layer) and passes as both the past input and the
 * present output, so onnxruntime appends each step's keys and values in place: the cache is never
 * copied, neither in the graph nor through JS. Per sequence b the kernel writes the S new positions at
 * `seqlens_k[b] + 1 - S …  seqlens_k[b]` and attends to `0 … seqlens_k[b]`; a call with S equal to
 * `total_seq_len` is a first prompt (right padding allowed, positions from 0). onnxruntime 1.30 allows
 * S > 1 with a past only for batch 1, so continuations run one sequence at a time on a view of its rows.
 *
 * Inputs (B sequences, S new tokens each, M cache length):
 *   input_ids int64 [B, S] · seqlens_k int32 [B] · total_seq_len int32 [] · past.L.key / past.L.value
 *   [B, nKV, M, D] in the compute dtype (float32, or float16 on a GPU provider) · with an adapter, merged:
 *   each Linear stack `[Σout, in]` in the compute dtype, the adapter merged in (named by `stackedWeightName`;
 *   merged_weights.ts), or unmerged: the adapter per group of Linears (lora_inputs.ts `groups`) ·
 *   score_mode bool [] · targets int64 [B, S] ·
 *   temperature float [] · sample bool [] (temperature > 0) · sample_rows int64 [B] (flat row of each sequence's last token) ·
 *   uniforms float [B] · filter bool [] · top_k int64 [1] · top_p float [] · constrain bool [] ·
 *   constraint_fill float [B] · constraint_ids int64 [B, K] · constraint_bias float [B, K] · top_n int64 [1]
 *   · score_top int64 [1]  (constraints and alternatives: lib/model/graph/head.ts)
 * The decode graph (`heads` "decode", plain decode steps: lib/engine/decode_session.ts) takes input_ids
 * int64 [B] (S = 1), seqlens_k, total_seq_len, the cache, the same weight inputs as the main graph, temperature float [B] and
 * uniforms float [B], and gives the present cache, next_tokens and next_logprobs; it has no If.
 * Outputs:
 *   present.L.key / present.L.value · target_logprobs float [B·S] (score mode; empty otherwise) ·
 *   next_tokens int64 [B] · next_logprobs float [B] · next_top_ids int64 [B, n] · next_top_logprobs
 *   float [B, n] (n = top_n) · score_top_ids int64 [B·S, k] · score_top_logprobs float [B·S, k]
 *   (k = score_top, score mode only)
 *
 * A policy with an adapter takes it in one of two forms (`AdapterForm`; which one runs where:
 * merged_weights.ts `mergesAdapter`). Merged: its Linears are fed with the adapter merged in,
 * `W + scale·B·A`, computed once per adapter (merged_weights.ts), so a decode step runs no LoRA kernels.
 * Unmerged: the Linears stay the checkpoint's (folded and prepacked, or shared) and each group of Linears
 * adds its adapter by two Gemms. The queries and keys leave their per-head norm already in
 * GroupQueryAttention's `[B, S, heads*D]` (decoder.ts `headLayout`).
 *
 * @module
 */

import { GraphBuilder, type Value } from "../onnx/builder.ts";
import { OPS } from "../onnx/ops.ts";
import type { ModelDir } from "../model/model_dir.ts";
import type { LoraShape } from "../model/lora.ts";
import { addLoraInputs } from "../model/graph/lora_inputs.ts";
import { addCheckpointWeights } from "../model/graph/weights.ts";
import { type AttentionFn, decoder, headWeight, toDtype } from "../model/graph/decoder.ts";
import {
  chunkedTargetLogprobs,
  chunkedTopLogprobs,
  headChunkRows,
  inverseTemperature,
  sampleNext,
  sampleUnbranched,
} from "../model/graph/head.ts";
import { type GraphForms, graphForms } from "../model/graph/forms.ts";
import type { SharedTensor, SharedWeights } from "../model/shared_weights.ts";
import { ropeTables } from "../model/graph/rope.ts";

const { Concat, Gather, Greater, GroupQueryAttention, If, Reshape, Shape, Squeeze } = OPS;

/** Graph input and output names the engine feeds and fetches. */
export const IO = {
  ids: "input_ids",
  seqlens: "seqlens_k",
  total: "total_seq_len",
  scoreMode: "score_mode",
  targets: "targets",
  temperature: "temperature",
  sample: "sample",
  sampleRows: "sample_rows",
  uniforms: "uniforms",
  filter: "filter",
  topK: "top_k",
  topP: "top_p",
  targetLogprobs: "target_logprobs",
  nextTokens: "next_tokens",
  nextLogprobs: "next_logprobs",
  constrain: "constrain",
  constraintFill: "constraint_fill",
  constraintIds: "constraint_ids",
  constraintBias: "constraint_bias",
  topN: "top_n",
  nextTopIds: "next_top_ids",
  nextTopLogprobs: "next_top_logprobs",
  scoreTop: "score_top",
  scoreTopIds: "score_top_ids",
  scoreTopLogprobs: "score_top_logprobs",
  pastKey: (layer: number) => `past.${layer}.key`,
  pastValue: (layer: number) => `past.${layer}.value`,
  presentKey: (layer: number) => `present.${layer}.key`,
  presentValue: (layer: number) => `present.${layer}.value`,
} as const;

/** A built inference model. */
export interface InferenceModel {
  bytes: Uint8Array;
  /** Folder the external weights are relative to (session option). */
  externalFolder: string;
  /** Built over shared weights: the shared tensors the session must be given (else empty). */
  shared: SharedTensor[];
}

/**
 * Which heads the graph carries: `all` (prefill, decode, continuation, scoring; the module comment), or
 * `decode`, the plain decode step's (`addDecodeHead`: no If, so it can be captured).
 */
export type InferenceHeads = "all" | "decode";

/**
 * How a graph built for an adapter takes it: merged into the Linear stacks, fed as inputs; or unmerged,
 * as per-group LoRA inputs beside the checkpoint's Linears.
 */
export type AdapterForm = "merged" | "unmerged";

/**
 * Builds the inference graph of `model`: for adapters of `lora`'s shape in `form` (null: no adapter, the
 * checkpoint's Linears); over `shared` weights when given (graph/weights.ts). Both `heads` take the same
 * weight and adapter inputs, so the engine feeds them the same tensors.
 */
export function buildInferenceModel(
  model: ModelDir,
  lora: LoraShape | null,
  forms: GraphForms = graphForms(),
  shared?: SharedWeights,
  heads: InferenceHeads = "all",
  form: AdapterForm = "merged",
): InferenceModel {
  const cfg = model.config;
  const { num_hidden_layers: L, num_key_value_heads: nKV, head_dim: D } = cfg;
  const g = new GraphBuilder("qwen3_infer");
  // The decode graph takes one id per sequence, `[B]`: a Reshape of the input would run on the CPU
  // (onnxruntime places small int64 work there), so the bound device ids would be copied when bound.
  const ids = heads === "decode" ? g.input(IO.ids, "int64", ["B"]) : g.input(IO.ids, "int64", ["B", "S"]);
  const seqlens = g.input(IO.seqlens, "int32", ["B"]);
  const total = g.input(IO.total, "int32", []);
  const past = Array.from({ length: L }, (_, l) => ({
    key: g.input(IO.pastKey(l), forms.compute, ["B", nKV, "M", D]),
    value: g.input(IO.pastValue(l), forms.compute, ["B", nKV, "M", D]),
  }));
  const merged = lora !== null && form === "merged";
  const weights = addCheckpointWeights(g, model, shared, forms.compute, merged ? "inputs" : "checkpoint");
  const loraInputs = addLoraInputs(g, cfg, merged ? null : lora, "groups", forms.compute);
  const rope = ropeTables(D, cfg.rope_theta, cfg.max_position_embeddings);
  const table = (name: string, data: Float32Array) =>
    toDtype(g, g.initializer(name, data, [rope.positions, rope.half]), forms.compute); // [P, D/2]
  const [cos, sin] = [table("rope.cos", rope.cos), table("rope.sin", rope.sin)]; // GQA takes them in q's dtype

  // GroupQueryAttention's layout [B, S, ·]: a shape computed from the ids in the main graph; a constant in
  // the decode graph ([-1, 1, ·]: S = 1, rows N = B), so that no shape there is computed from a device
  // tensor (a copy to the host inside the run, which graph capture refuses). Where GroupQueryAttention
  // applies the q/k norms (`forms.attentionNorms`: WebGPU, so always in the decode graph), q/k/v's Gemm
  // output takes the layout before its Split (decoder.ts `attentionLayout`), one Reshape a layer for the
  // three. Elsewhere q and k leave their norm in it (`headLayout`) and v is reshaped to it here. Not the
  // decode graph with norms before the attention: in its constant layout onnxruntime 1.30 fuses them into
  // the attention on its own (GroupQueryAttentionPreNormFusion) and refuses the session, "Inputs 0 (query)
  // shall be 3 dimensions" (its fused query is the rows before the norm's Reshapes).
  const batched = heads === "decode" ? null : Concat.emit(g, [Shape.emit(g, ids), g.ints([-1])], 0); // [3]
  const layout = batched ?? [-1, 1, (cfg.num_attention_heads + 2 * nKV) * D];
  const attentionNorms = forms.attentionNorms || heads === "decode";
  if (attentionNorms && forms.ep !== "webgpu") {
    throw new Error(`inference graph: GroupQueryAttention's q/k norms need webgpu, not ${forms.ep}`);
  }
  const attention: AttentionFn = (layer, q, k, v, norms) => {
    const [out, presentKey, presentValue] = GroupQueryAttention.emit(g, {
      query: q, // [B, S, nH*D] (attentionLayout, or headLayout)
      key: k, // [B, S, nKV*D] (attentionLayout, or headLayout)
      value: attentionNorms ? v : Reshape.emit(g, v, layout), // [B, S, nKV*D]
      pastKey: past[layer].key,
      pastValue: past[layer].value,
      seqlensK: seqlens,
      totalSequenceLength: total,
      cosCache: cos,
      sinCache: sin,
      qNormWeight: norms?.q,
      kNormWeight: norms?.k,
    }, {
      numHeads: cfg.num_attention_heads,
      kvNumHeads: nKV,
      doRotary: true,
      qkNormEpsilon: norms?.epsilon,
    }); // [B, S, nH*D]
    g.output(presentKey, IO.presentKey(layer));
    g.output(presentValue, IO.presentValue(layer));
    return Reshape.emit(g, out, [-1, cfg.num_attention_heads * D]); // [N, nH*D]
  };
  const flatIds = heads === "decode" ? ids : Reshape.emit(g, ids, [-1]); // [N]
  const parts = {
    cfg,
    weights,
    lora: loraInputs,
    attention,
    attentionNorms,
    attentionLayout: layout,
    headLayout: attentionNorms ? undefined : batched ?? undefined,
  };
  const hidden = decoder(g, flatIds, parts); // [N, H]
  if (heads === "all") addHeads(g, hidden, headWeight(cfg, weights), cfg.vocab_size, forms);
  else addDecodeHead(g, hidden, headWeight(cfg, weights), cfg.vocab_size);
  return {
    bytes: g.toModel({ doc: `Qwen3 inference graph for ${model.dir}` }),
    externalFolder: weights.folder,
    shared: weights.shared,
  };
}

/** Score head (all rows, in chunks, only in score mode) and sampling head (one row per sequence). */
function addHeads(
  g: GraphBuilder,
  hidden: Value,
  w: Value,
  vocab: number,
  forms: GraphForms,
): void {
  const chunk = forms.chunkedHead ? headChunkRows(vocab) : null;
  const scoreMode = g.input(IO.scoreMode, "bool", []);
  const targets = g.input(IO.targets, "int64", ["B", "S"]);
  const temperature = g.input(IO.temperature, "float32", []);
  const sampleRows = g.input(IO.sampleRows, "int64", ["B"]);
  const sampler = {
    temperature,
    sample: g.input(IO.sample, "bool", []),
    uniforms: g.input(IO.uniforms, "float32", ["B"]),
    filter: g.input(IO.filter, "bool", []),
    topK: g.input(IO.topK, "int64", [1]),
    topP: g.input(IO.topP, "float32", []),
  };
  const [scores] = If.emit(
    g,
    scoreMode,
    (b) => [
      chunkedTargetLogprobs(
        b,
        hidden,
        Reshape.emit(b, targets, [-1]),
        w,
        inverseTemperature(b, temperature),
        chunk,
        forms.logSoftmax,
      ),
    ],
    (b) => [b.constant(new Float32Array(0), [0])],
    "score",
  ); // [N] or [0]
  g.output(scores, IO.targetLogprobs);
  const rows = Gather.emit(g, hidden, sampleRows, 0); // [B, H]
  const [tokens, logprobs, topIds, topLogprobs] = sampleNext(g, rows, w, vocab, sampler, servingExtras(g));
  g.output(tokens, IO.nextTokens); // [B]
  g.output(logprobs, IO.nextLogprobs); // [B]
  g.output(topIds, IO.nextTopIds); // [B, n]
  g.output(topLogprobs, IO.nextTopLogprobs); // [B, n]
  addScoreAlternatives(g, scoreMode, hidden, w, inverseTemperature(g, temperature), chunk, forms);
}

/**
 * The decode graph's head: one new token per sequence (S = 1, so the rows of `hidden` are the
 * sequences'), sampled where temperature > 0 and greedy where it is 0, without an If (graph capture
 * refuses control flow): inputs temperature float [B] (one per sequence, all equal) and uniforms float
 * [B]; outputs next_tokens and next_logprobs, as `addHeads` computes them on its unfiltered, unconstrained
 * path.
 */
function addDecodeHead(g: GraphBuilder, hidden: Value, w: Value, vocab: number): void {
  const temperatures = g.input(IO.temperature, "float32", ["B"]);
  const uniforms = g.input(IO.uniforms, "float32", ["B"]);
  const [tokens, logprobs] = sampleUnbranched(g, hidden, w, vocab, temperatures, uniforms); // [B], [B]
  g.output(tokens, IO.nextTokens);
  g.output(logprobs, IO.nextLogprobs);
}

/** The sampler's constraint and alternative inputs (`deno task serve`; head.ts). */
function servingExtras(g: GraphBuilder) {
  return {
    constraints: {
      enabled: g.input(IO.constrain, "bool", []),
      fill: g.input(IO.constraintFill, "float32", ["B"]),
      ids: g.input(IO.constraintIds, "int64", ["B", "K"]),
      bias: g.input(IO.constraintBias, "float32", ["B", "K"]),
    },
    topN: g.input(IO.topN, "int64", [1]),
  };
}

/**
 * The k most likely tokens after every scored row, only in score mode with score_top > 0. Two nested Ifs
 * rather than one on `And`: a GPU provider computes `And` on the device, and an If reads its condition on
 * the host, so that condition would be a device-to-host copy in every run.
 */
function addScoreAlternatives(
  g: GraphBuilder,
  scoreMode: Value,
  hidden: Value,
  w: Value,
  invT: Value,
  chunk: number | null,
  forms: GraphForms,
): void {
  const k = g.input(IO.scoreTop, "int64", [1]);
  const none = (b: GraphBuilder) => [
    b.constant(new BigInt64Array(0), [0, 0], "int64"),
    b.constant(new Float32Array(0), [0, 0]),
  ];
  const [ids, logprobs] = If.emit(
    g,
    scoreMode,
    (b) =>
      If.emit(
        b,
        Squeeze.emit(b, Greater.emit(b, k, 0), [0]),
        (c) => chunkedTopLogprobs(c, hidden, w, invT, chunk, forms.logSoftmax, k),
        none,
        "score_alternatives",
      ),
    none,
    "score_mode_alternatives",
  ); // [N, k] or [0, 0]
  g.output(ids, IO.scoreTopIds);
  g.output(logprobs, IO.scoreTopLogprobs);
}
