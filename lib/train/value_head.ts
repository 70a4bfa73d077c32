/**
 * The value head (seed 002's SimpleValueHead) and its loss, for PPO (`mask.estimator: gae`):
 *
 *   V(h) = W2 · relu(W1 · h + b1) + b2          h: the final hidden state (after the final norm) [H]
 *
 * with W1 `[H/2, H]`, b1 `[H/2]`, W2 `[1, H/2]`, b2 `[1]`, named as torch's `nn.Sequential` state dict
 * names them (`value_head.0.weight`, `value_head.0.bias`, `value_head.2.weight`, `value_head.2.bias`), so a
 * saved head loads into seed 002's module as is. Initialised as torch's `nn.Linear`: every entry uniform in
 * ±1/sqrt(fan_in), from a seed. The head reads the hidden state of the row whose logits predict token t,
 * so `values[t]` is V of the state before token t, aligned with `logprobs[t]`.
 *
 * In the train graph its tensors are inputs (like LoRA) and its gradients come from autodiff; it runs on
 * the same head rows as the policy loss, and its gradient reaches the LoRA tensors through the shared
 * hidden states (a value head on the policy's trunk, as TRL's PPO trains it). Per token, with R the
 * `returns` entry and V_old the rollout's `values` entry:
 *
 *   squared:  lv = (V − R)²                                                   (seed 002: mse, no ½)
 *   clipped:  lv = max((V − R)², (V_old + clip(V − V_old, −c, c) − R)²)        c = train.value.clip
 *   loss     += vf_coef · Σ weight · lv                (the policy loss's aggregation weights)
 *
 * Each loss variant is a record declaring the per-token inputs it reads (objective.ts `TokenInput`).
 *
 * Dimension legend: M head rows, H hidden, H2 = H / 2.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../onnx/builder.ts";
import { OPS } from "../onnx/ops.ts";
import { Rng, streamSeed } from "../model/prng.ts";
import type { Tensors } from "./optimizer.ts";
import { clip, type TokenInput } from "../losses/objective.ts";

const { Add, Gemm, Greater, Max, Mul, Reshape, Sub, Where } = OPS;

/** One tensor of the head: its state-dict key and shape. */
export interface ValueTensorSpec {
  key: string;
  dims: number[];
}

/** The head's tensors for hidden size `hidden`, in graph-input order. */
export function valueHeadSpecs(hidden: number): ValueTensorSpec[] {
  const half = Math.floor(hidden / 2);
  return [
    { key: "value_head.0.weight", dims: [half, hidden] },
    { key: "value_head.0.bias", dims: [half] },
    { key: "value_head.2.weight", dims: [1, half] },
    { key: "value_head.2.bias", dims: [1] },
  ];
}

/** Elements of a tensor of `dims`. */
export function sizeOf(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

/** A fresh head: each entry uniform in ±1/sqrt(fan_in) (torch's nn.Linear), one stream per tensor. */
export function initValueHead(hidden: number, seed: number): Tensors {
  const out: Tensors = new Map();
  for (const t of valueHeadSpecs(hidden)) {
    const fanIn = t.key.startsWith("value_head.0") ? hidden : Math.floor(hidden / 2);
    const bound = 1 / Math.sqrt(fanIn);
    const rng = new Rng(streamSeed(seed, t.key));
    out.set(t.key, Float32Array.from({ length: sizeOf(t.dims) }, () => (2 * rng.uniform() - 1) * bound));
  }
  return out;
}

/** The head's tensors as graph inputs, in `valueHeadSpecs` order. */
export function addValueHeadInputs(g: GraphBuilder, hidden: number): Value[] {
  return valueHeadSpecs(hidden).map((t) => g.input(t.key, "float32", t.dims));
}

/** V of each row of `h` `[M, H]`: `[M]`. */
export function valueHead(g: GraphBuilder, h: Value, params: readonly Value[]): Value {
  const [w1, b1, w2, b2] = params;
  const z = Gemm.emit(g, h, w1, b1, { transB: true }); // [M, H2]
  const relu = Where.emit(g, Greater.emit(g, z, 0), z, 0); // [M, H2]; gradient 0 at 0, as torch's
  const v = Gemm.emit(g, relu, w2, b2, { transB: true }); // [M, 1]
  return Reshape.emit(g, v, [-1]); // [M]
}

/** The value head's target. */
export const RETURNS: TokenInput = {
  name: "returns",
  column: "returns",
  doc: "the value head's target (advantage + value, from the mask stage)",
};
/** The rollout's values, the centre of value clipping. */
export const OLD_VALUES: TokenInput = {
  name: "old_values",
  column: "values",
  doc: "the rollout's values (the centre of value clipping)",
};

/** Per-row inputs of a value loss, each `[M]`, and the clip range `[]`. */
export interface ValueLossInputs {
  values: Value;
  inputs: Readonly<Record<string, Value>>;
  clip: Value;
}

/** A value-loss variant: its per-token loss and the per-token inputs it reads. */
export interface ValueLoss {
  name: "squared" | "clipped";
  inputs: readonly TokenInput[];
  tokenLoss: (g: GraphBuilder, x: ValueLossInputs) => Value; // [M]
}

/** The value-loss variants; `train.value.clip` null picks `squared`, a number `clipped`. */
export const VALUE_LOSSES: Readonly<Record<ValueLoss["name"], ValueLoss>> = {
  squared: {
    name: "squared",
    inputs: [RETURNS],
    tokenLoss: (g, x) => {
      const err = Sub.emit(g, x.values, x.inputs[RETURNS.name]); // [M]
      return Mul.emit(g, err, err); // [M]
    },
  },
  clipped: {
    name: "clipped",
    inputs: [RETURNS, OLD_VALUES],
    tokenLoss: (g, x) => {
      const returns = x.inputs[RETURNS.name], old = x.inputs[OLD_VALUES.name];
      const err = Sub.emit(g, x.values, returns); // [M]
      const step = clip(g, Sub.emit(g, x.values, old), Mul.emit(g, x.clip, -1), x.clip); // [M]
      const clippedErr = Sub.emit(g, Add.emit(g, old, step), returns); // [M]
      return Max.emit(g, Mul.emit(g, err, err), Mul.emit(g, clippedErr, clippedErr)); // [M]
    },
  },
};

/** Graph names of the value head's own scalar inputs and outputs. */
export const VALUE_IO = {
  vfCoef: "vf_coef",
  clip: "value_clip",
  values: "values",
  valueLoss: "value_loss",
} as const;

/** What the value head adds to the train graph. */
export interface ValueHeadPart {
  /** V per head row `[M]`. */
  values: Value;
  /** Σ weight · lv `[]` (before vf_coef). */
  valueLoss: Value;
  /** vf_coef · valueLoss `[]`, added to the graph's loss. */
  scaledLoss: Value;
  /** d(scaledLoss)/d(head hidden) `[M, H]`, added to the policy head's. */
  dHidden: Value;
  /** The head's tensors (graph inputs) and d(scaledLoss)/d(each). */
  params: Value[];
  grads: Value[];
}

/**
 * The value head on the head rows `headHidden` `[M, H]` with loss `loss`, its scalar inputs (vf_coef,
 * value_clip) declared here, and its backward walk to the rows and to its own tensors.
 */
export function addValueHead(
  g: GraphBuilder,
  x: { headHidden: Value; weights: Value; inputs: Readonly<Record<string, Value>>; hidden: number },
  loss: ValueLoss,
  backward: (seed: Value, wrt: Value[]) => (Value | null)[],
): ValueHeadPart {
  const vfCoef = g.input(VALUE_IO.vfCoef, "float32", []);
  const clip = g.input(VALUE_IO.clip, "float32", []);
  const params = addValueHeadInputs(g, x.hidden);
  const values = valueHead(g, x.headHidden, params); // [M]
  const lv = loss.tokenLoss(g, { values, inputs: x.inputs, clip }); // [M]
  const valueLoss = OPS.ReduceSum.emit(g, Mul.emit(g, x.weights, lv), [0], { keepdims: false }); // []
  const scaledLoss = Mul.emit(g, valueLoss, vfCoef); // []
  const [dHidden, ...grads] = backward(scaledLoss, [x.headHidden, ...params]);
  if (!dHidden || grads.some((d) => !d)) throw new Error("train graph: no gradient reaches the value head");
  return { values, valueLoss, scaledLoss, dHidden, params, grads: grads as Value[] };
}
