/**
 * The train graph: forward, fused head + objective, and backward to the LoRA tensors, in one ONNX
 * model that onnxruntime runs in one call per micro-batch.
 *
 * Decoder as in inference (decoder.ts, LoRA as inputs) with attention of primitive ops
 * (attention.ts); head and objective fused per chunk (head_loss.ts); the reverse walk of autodiff.ts
 * from the final hidden states, seeded with the head's dLoss/dhidden, gives dLoss/d(each LoRA tensor).
 *
 * Inputs (B rows of T tokens, right-padded, N = B·T; the head runs on M of the N positions, those
 * with loss weight, and each head row's values describe the token its logits predict):
 *   input_ids int64 [B, T] · position_ids int64 [B, T] · head_rows int64 [M] (flat positions) ·
 *   targets int64 [M] · loss_weights [M] · the algorithm's per-token inputs [M] each, in the order
 *   algorithm.ts declares them (clipped: old_logprobs, advantages, and ref_logprobs with a reference;
 *   sft: none) · temperature [] · the loss's declared scalars [] each, named by their config keys
 *   (clipped, gspo, cispo: eps_low, eps_high, beta; sft: none) · chunk int64 [] (divides M) ·
 *   LoRA inputs, one stacked A and one block-diagonal scaled B per group of Linears (lora_groups.ts), in
 *   the compute dtype (in float16 the gradients of the float16 tensors are what float32 inputs cast in
 *   the graph would get, without the Casts)
 * With a value head (value_head.ts; the algorithm declares it): vf_coef [] · value_clip [] · the head's
 *   four tensors.
 * Outputs:
 *   logprobs, pg, kl, clipped, entropy [M] · loss [] · grad.<input name> per LoRA group tensor (its dtype); with a value
 *   head also values [M] · value_loss [] · grad.<value head key> per head tensor (loss then includes
 *   vf_coef · value_loss)
 *
 * @module
 */

import { GraphBuilder } from "../onnx/builder.ts";
import { backward } from "../onnx/autodiff.ts";
import { OPS } from "../onnx/ops.ts";
import type { ModelDir } from "../model/model_dir.ts";
import type { LoraShape } from "../model/lora.ts";
import { addLoraInputs } from "../model/graph/lora_inputs.ts";
import { addCheckpointWeights } from "../model/graph/weights.ts";
import { decoder, headWeight, toDtype } from "../model/graph/decoder.ts";
import { inverseTemperature } from "../model/graph/head.ts";
import { type ComputeDtype, graphForms } from "../model/graph/forms.ts";
import { ropeTables } from "../model/graph/rope.ts";
import type { ExecutionProvider } from "../ort/providers.ts";
import type { SharedTensor, SharedWeights } from "../model/shared_weights.ts";
import { causalAttention, shaped } from "./attention.ts";
import { chunkedHeadLogprobs, fusedHeadLoss } from "./head_loss.ts";
import { type AlgorithmSpec, policyLossOf, tokenInputsOf, valueLossOf } from "./algorithm.ts";
import { addValueHead, VALUE_IO, type ValueHeadPart } from "./value_head.ts";

const { Add, Expand, Gather, Reshape, ScatterND, Shape, Unsqueeze } = OPS;

/** Graph input and output names. */
export const TRAIN_IO = {
  ids: "input_ids",
  positions: "position_ids",
  headRows: "head_rows",
  targets: "targets",
  weights: "loss_weights",
  temperature: "temperature",
  chunk: "chunk",
  logprobs: "logprobs",
  pg: "pg",
  kl: "kl",
  clipped: "clipped",
  entropy: "entropy",
  loss: "loss",
  grad: (key: string) => `grad.${key}`,
} as const;

/** Which train graph: LoRA shape, and the algorithm (objective, reference) that declares its inputs. */
export interface TrainGraphSpec extends AlgorithmSpec {
  lora: LoraShape;
  ep?: ExecutionProvider;
  /** Weights and activations (default float32; float16 on a GPU provider; graph/forms.ts). */
  compute?: ComputeDtype;
}

/** A built train model. */
export interface TrainModel {
  bytes: Uint8Array;
  externalFolder: string;
  /** Names of the LoRA group inputs (lora_inputs.ts groups layout); each has an output `grad.<name>`. */
  loraInputs: string[];
  /** Built over shared weights: the shared tensors the session must be given (else empty). */
  shared: SharedTensor[];
}

/** The value head's outputs: values, value_loss and a gradient per head tensor. */
function addValueOutputs(g: GraphBuilder, value: ValueHeadPart): void {
  g.output(value.values, VALUE_IO.values);
  g.output(value.valueLoss, VALUE_IO.valueLoss);
  value.params.forEach((p, i) => g.output(value.grads[i], TRAIN_IO.grad(p.name)));
}

/**
 * Builds the train graph of `model` for `spec`, over `shared` weights when given (graph/weights.ts).
 * `forwardOnly`: the same graph with the log-probs (and the value head's values) as its only outputs, so
 * that only the nodes they depend on are written (GraphBuilder): the forward pass, for the passes that read
 * no gradient.
 */
export function buildTrainModel(
  model: ModelDir,
  spec: TrainGraphSpec,
  shared?: SharedWeights,
  forwardOnly = false,
): TrainModel {
  const cfg = model.config;
  const g = new GraphBuilder("qwen3_train");
  const ids = g.input(TRAIN_IO.ids, "int64", ["B", "T"]);
  const positions = g.input(TRAIN_IO.positions, "int64", ["B", "T"]);
  const headRows = g.input(TRAIN_IO.headRows, "int64", ["M"]);
  const rowInput = (name: string, dtype: "float32" | "int64" = "float32") => g.input(name, dtype, ["M"]); // [M]
  const targets = rowInput(TRAIN_IO.targets, "int64");
  const weightsIn = rowInput(TRAIN_IO.weights);
  const tokenInputs = Object.fromEntries(tokenInputsOf(spec).map((i) => [i.name, rowInput(i.name)]));
  const scalar = (name: string) => g.input(name, "float32", []);
  const temperature = scalar(TRAIN_IO.temperature);
  // The loss's declared scalars, each a graph input named by its config key (clipped: eps_low, eps_high, beta).
  const scalars = Object.fromEntries(policyLossOf(spec).scalars.map((s) => [s.key, scalar(s.key)]));
  const chunk = g.input(TRAIN_IO.chunk, "int64", []);

  const forms = graphForms(spec.ep, spec.compute);
  const weights = addCheckpointWeights(g, model, shared, forms.compute);
  const lora = addLoraInputs(g, cfg, spec.lora, "groups", forms.compute); // lora_groups.ts
  const rope = ropeTables(cfg.head_dim, cfg.rope_theta, cfg.max_position_embeddings);
  const table = (name: string, data: Float32Array) =>
    toDtype(g, g.initializer(name, data, [rope.positions, rope.half]), forms.compute); // [P, D/2]
  const [cos, sin] = [table("rope.cos", rope.cos), table("rope.sin", rope.sin)];
  const attention = causalAttention(g, cfg, Shape.emit(g, ids), positions, cos, sin);
  const flatIds = shaped(Reshape.emit(g, ids, [-1]), ["N"]); // [N]
  const parts = { cfg, weights, lora, attention, normStats: forms.normStats }; // decoder.ts
  const hidden = shaped(decoder(g, flatIds, parts), ["N", cfg.hidden_size]); // [N, H]

  const headHidden = shaped(Gather.emit(g, hidden, headRows, 0), ["M", cfg.hidden_size]); // [M, H]
  const headIn = {
    hidden: headHidden,
    targets,
    weights: weightsIn,
    inputs: tokenInputs,
    invT: inverseTemperature(g, temperature),
    scalars,
    chunk,
  };
  const headW = headWeight(cfg, weights); // [V, H]
  const head = fusedHeadLoss(
    g,
    headIn,
    headW,
    cfg.hidden_size,
    policyLossOf(spec).tokenLoss,
    forms.logSoftmax,
    { chunked: forms.chunkedHead, gradientSum: forms.gradientSum },
  );

  const valueLoss = valueLossOf(spec);
  const value = valueLoss
    ? addValueHead(
      g,
      { headHidden, weights: weightsIn, inputs: tokenInputs, hidden: cfg.hidden_size },
      valueLoss,
      (seed, wrt) => backward(g, [{ value: seed, grad: g.scalar(1) }], wrt, { sum: forms.gradientSum }),
    )
    : undefined;
  const dHead = value ? Add.emit(g, head.dHidden, value.dHidden) : head.dHidden; // [M, H]
  // Zeros by Expand rather than ConstantOfShape: a GPU provider has no ConstantOfShape kernel and would
  // make the [N, H] zeros on the host and copy them over in every step (graph/forms.ts).
  const zeros = shaped(Expand.emit(g, g.scalar(0), Shape.emit(g, hidden)), ["N", cfg.hidden_size]); // [N, H]
  const dHidden = ScatterND.emit(
    g,
    zeros,
    Unsqueeze.emit(g, headRows, [1]),
    dHead,
    "add",
  ); // [N, H]
  const built = (doc: string): TrainModel => ({
    bytes: g.toModel({ doc: `${doc} for ${model.dir}` }),
    externalFolder: weights.folder,
    loraInputs: lora.tensors.map((t) => t.name),
    shared: weights.shared,
  });
  if (forwardOnly) {
    // The chunked head is a Loop, which runs whole: its log-probs alone come from a Loop of their own.
    const logprobs = forms.chunkedHead
      ? chunkedHeadLogprobs(g, headIn, headW, cfg.hidden_size, forms.logSoftmax)
      : head.logprobs;
    g.output(logprobs, TRAIN_IO.logprobs);
    if (value) g.output(value.values, VALUE_IO.values);
    return built("Qwen3 LoRA log-probs (the train graph's forward)");
  }
  const seed = { value: hidden, grad: shaped(dHidden, ["N", cfg.hidden_size]) };
  const grads = backward(g, [seed], lora.tensors, {
    sum: forms.gradientSum,
    readsNormStats: forms.normStats,
  });
  lora.tensors.forEach((t, i) => {
    if (!grads[i]) throw new Error(`train graph: no gradient reaches ${t.name}`);
    g.output(grads[i]!, TRAIN_IO.grad(t.name));
  });
  for (const [name, v] of Object.entries({ logprobs: head.logprobs, pg: head.pg, kl: head.kl })) {
    g.output(v, name);
  }
  g.output(head.clipped, TRAIN_IO.clipped);
  g.output(head.entropy, TRAIN_IO.entropy);
  g.output(value ? Add.emit(g, head.loss, value.scaledLoss) : head.loss, TRAIN_IO.loss);
  if (value) addValueOutputs(g, value);
  return built("Qwen3 LoRA train graph");
}
