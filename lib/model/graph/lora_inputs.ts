/**
 * LoRA tensors as graph inputs, so one graph serves every adapter of the same rank and targets, and
 * switching adapters is a new feed. Two layouts:
 *
 * - **pairs**: each Linear's A and B named by their PEFT keys, plus a `lora_scale` scalar input; the
 *   gradients come back under the same keys. (No graph of the toolkit uses it since issue 29.)
 * - **groups** (the train graph, lib/train/lora_groups.ts, and the inference graph unmerged): per layer and
 *   group of Linears that read one input (q/k/v, o, gate/up, down; model_dir.ts), one A `[Σr, in]` (the
 *   members' A stacked) and one B `[Σout, Σr]` (block diagonal, the scale folded in; zero rows for a member
 *   without an adapter), so a group's adapter is two Gemms whatever its members (`groupedLora` builds them
 *   from an adapter's pairs), fed in the compute dtype (float16 on a GPU: no Cast kernels). A decode step
 *   of a 28-layer model with all seven targets runs 364 fewer kernels than with pairs. A policy that merges
 *   its adapter (lib/engine/merged_weights.ts, by default on GPU providers) declares none, and merges by
 *   one Gemm per group over these same tensors.
 *
 * @module
 */

import type { GraphBuilder, Value } from "../../onnx/builder.ts";
import type { Qwen3Config } from "../hf_config.ts";
import {
  type LoraShape,
  loraTensorSpecs,
  type LoraWeights,
  peftKey,
  type QwenLinear,
  TARGET_MODULE,
} from "../lora.ts";
import { linearShape, QWEN3_LINEAR_GROUPS } from "../model_dir.ts";

/** The graph input holding `alpha / r` (or `alpha / sqrt(r)`). */
export const LORA_SCALE_INPUT = "lora_scale";

/** One Linear's adapter inside a graph. */
export interface LoraPairValues {
  a: Value; // [r, in]
  b: Value; // [out, r]
  scale: Value; // []
}

/** One group's adapter inside a graph (groups layout): `x Aᵀ Bᵀ` is the whole group's update. */
export interface LoraGroupValues {
  a: Value; // [Σr, in]
  b: Value; // [Σout, Σr], scaled
}

/** A graph's LoRA inputs. */
export interface LoraInputs {
  /** The pair of a Linear (pairs layout), or undefined when it has none. */
  pair(layer: number, linear: QwenLinear): LoraPairValues | undefined;
  /** The adapter of group `index` of QWEN3_LINEAR_GROUPS (groups layout), or undefined. */
  group(layer: number, index: number): LoraGroupValues | undefined;
  /** Every A and B input, in declaration order. */
  readonly tensors: readonly Value[];
}

export type LoraLayout = "pairs" | "groups";

const NO_LORA: LoraInputs = { pair: () => undefined, group: () => undefined, tensors: [] };

/** Declares the LoRA inputs of `shape` on `g` in `layout`; `null` gives a graph without LoRA. */
export function addLoraInputs(
  g: GraphBuilder,
  cfg: Qwen3Config,
  shape: LoraShape | null,
  layout: LoraLayout = "pairs",
  groupDtype: "float32" | "float16" = "float32",
): LoraInputs {
  if (shape === null) return NO_LORA;
  if (layout === "groups") return addGroupInputs(g, cfg, shape, groupDtype);
  const scale = g.input(LORA_SCALE_INPUT, "float32", []);
  const byKey = new Map<string, Value>();
  for (const t of loraTensorSpecs(cfg, shape)) {
    byKey.set(`${t.layer}.${t.linear}.${t.which}`, g.input(t.key, "float32", t.dims));
  }
  return {
    tensors: [...byKey.values()],
    pair(layer, linear) {
      const a = byKey.get(`${layer}.${linear}.A`);
      const b = byKey.get(`${layer}.${linear}.B`);
      return a && b ? { a, b, scale } : undefined;
    },
    group: () => undefined,
  };
}

/** One group input of the groups layout: its graph name and dims. */
export interface LoraGroupSpec {
  layer: number;
  /** Index into QWEN3_LINEAR_GROUPS. */
  index: number;
  /** The group's Linears that carry an adapter, in group order. */
  targeted: QwenLinear[];
  a: { name: string; dims: [number, number] };
  b: { name: string; dims: [number, number] };
}

/** The groups layout's inputs for `shape`, in declaration order (groups without a target left out). */
export function loraGroupSpecs(cfg: Qwen3Config, shape: LoraShape): LoraGroupSpec[] {
  const targeted = new Set(shape.targets.map((t) => TARGET_MODULE[t]));
  const specs: LoraGroupSpec[] = [];
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    QWEN3_LINEAR_GROUPS.forEach((group, index) => {
      const members = group.filter((linear) => targeted.has(linear));
      if (members.length === 0) return;
      const rank = members.length * shape.r;
      const outs = group.reduce((n, linear) => n + linearShape(cfg, linear)[0], 0);
      const inDim = linearShape(cfg, group[0])[1];
      const base = `lora_group.${layer}.${index}`;
      specs.push({
        layer,
        index,
        targeted: members,
        a: { name: `${base}.A`, dims: [rank, inDim] },
        b: { name: `${base}.B`, dims: [outs, rank] },
      });
    });
  }
  return specs;
}

function addGroupInputs(
  g: GraphBuilder,
  cfg: Qwen3Config,
  shape: LoraShape,
  dtype: "float32" | "float16",
): LoraInputs {
  const byGroup = new Map<string, LoraGroupValues>();
  for (const spec of loraGroupSpecs(cfg, shape)) {
    const a = g.input(spec.a.name, dtype, spec.a.dims);
    const b = g.input(spec.b.name, dtype, spec.b.dims);
    byGroup.set(`${spec.layer}.${spec.index}`, { a, b });
  }
  return {
    tensors: [...byGroup.values()].flatMap((v) => [v.a, v.b]),
    pair: () => undefined,
    group: (layer, index) => byGroup.get(`${layer}.${index}`),
  };
}

/**
 * An adapter's pairs (PEFT keys) in the groups layout, by input name: each group's A is its targeted
 * members' A stacked in group order; its B holds `scale · B_i` in member i's rows and A-columns, zeros
 * elsewhere. `x Aᵀ Bᵀ` then equals the pairs layout's `Σ_i scale · x A_iᵀ B_iᵀ` placed in the rows of
 * each member's output.
 */
export function groupedLora(
  cfg: Qwen3Config,
  shape: LoraShape,
  pairs: LoraWeights,
  scale: number,
): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const spec of loraGroupSpecs(cfg, shape)) {
    const [rank, inDim] = spec.a.dims;
    const a = new Float32Array(rank * inDim);
    const b = new Float32Array(spec.b.dims[0] * rank);
    let row = 0; // first output row of the current member
    let col = 0; // first A row (B column) of the current member
    for (const linear of QWEN3_LINEAR_GROUPS[spec.index]) {
      const outDim = linearShape(cfg, linear)[0];
      if (spec.targeted.includes(linear)) {
        a.set(pairs.get(peftKey(spec.layer, linear, "A"))!, col * inDim);
        const bPair = pairs.get(peftKey(spec.layer, linear, "B"))!; // [outDim, r]
        for (let i = 0; i < outDim; i++) {
          for (let j = 0; j < shape.r; j++) b[(row + i) * rank + col + j] = scale * bPair[i * shape.r + j];
        }
        col += shape.r;
      }
      row += outDim;
    }
    out.set(spec.a.name, a);
    out.set(spec.b.name, b);
  }
  return out;
}
