/**
 * `MergedWeights`: a policy's Linear stacks with its adapter merged in, `W + scale·B·A`, computed once per
 * adapter (per policy version in a run) and fed to the inference graph in place of the checkpoint's
 * (infer_graph.ts). A decode step then runs four Gemms per layer and no LoRA kernels at all (issue 29).
 *
 * The merge is one run of a small CPU graph: per group of Linears that read one input (q/k/v, o,
 * gate/up, down), one Gemm `B_g · A_g + W_g` over the group's stacked A and block-diagonal, scaled B
 * (lora_inputs.ts `groupedLora`), cast to the compute dtype where that is float16. Groups without an
 * adapter are fed the base stack as is.
 *
 * Numerics: float32 merged weights differ from the unmerged `x Wᵀ + scale·(x Aᵀ) Bᵀ` by the rounding of
 * one add per weight; a float16 policy rounds `W + scale·B·A` to float16 once, where the unmerged graph
 * rounded W, A, B and both products. Measured in docs/ENGINE_FACTS.md ("Kernels per run"); tested by
 * tests/engine/merged_weights_test.ts.
 *
 * Memory: the base stacks in float32 (the process's shared weights where given, else a copy of the
 * Linears only) plus the merged copy the session reads (on a GPU provider, uploaded once).
 *
 * Where it runs (`mergesAdapter`): by default on GPU providers only. There a decode step is dispatch-bound
 * (each kernel ~22 µs) and the merge saves 224 kernels a step at 28 layers; on the CPU a kernel costs
 * microseconds, while the merged copy would add a second float32 copy of every Linear beside the process's
 * shared weights (~1.8 GB for Qwen3-0.6B) and, without shared weights, lose MLAS's prepacking of the
 * Linears (inputs are never prepacked). docs/ENGINE_FACTS.md, "Kernels per run".
 *
 * @module
 */

import { GraphBuilder } from "../onnx/builder.ts";
import { OPS } from "../onnx/ops.ts";
import type { ModelDir } from "../model/model_dir.ts";
import type { LoraShape, LoraWeights } from "../model/lora.ts";
import { groupedLora, type LoraGroupSpec, loraGroupSpecs } from "../model/graph/lora_inputs.ts";
import type { ComputeDtype } from "../model/graph/forms.ts";
import {
  loadLinearStacks,
  type SharedTensor,
  sharedTensorData,
  type SharedWeights,
  stackedWeightName,
} from "../model/shared_weights.ts";
import { QWEN3_LINEAR_GROUPS } from "../model/model_dir.ts";
import type { HostTensor } from "../ort/value.ts";
import type { ExecutionProvider } from "../ort/providers.ts";
import { type EngineSession, openEngineSession } from "./session.ts";

const BASE_PREFIX = "base.";

/**
 * Whether a policy on `ep` takes its adapter merged into its Linears: `merge` where given, else merged on
 * a GPU provider and unmerged on the CPU (`model.merge_adapter: auto`; why: this module's doc).
 */
export function mergesAdapter(merge: boolean | undefined, ep: ExecutionProvider = "cpu"): boolean {
  return merge ?? ep !== "cpu";
}

/** The Linear stacks of one policy, with or without an adapter merged in. */
export class MergedWeights {
  readonly #base: Map<string, SharedTensor & { data: Float32Array }>;
  readonly #specs: LoraGroupSpec[];
  readonly #merge: EngineSession;
  readonly #lora: LoraShape;
  readonly #compute: ComputeDtype;
  readonly #model: ModelDir;

  private constructor(
    model: ModelDir,
    lora: LoraShape,
    compute: ComputeDtype,
    base: SharedWeights,
    merge: EngineSession,
  ) {
    this.#model = model;
    this.#lora = lora;
    this.#compute = compute;
    this.#specs = loraGroupSpecs(model.config, lora);
    this.#merge = merge;
    const byName = new Map(base.tensors.map((t) => [t.name, t]));
    this.#base = new Map();
    for (let layer = 0; layer < model.config.num_hidden_layers; layer++) {
      for (const group of QWEN3_LINEAR_GROUPS) {
        const t = byName.get(stackedWeightName(layer, group))!; // both layouts hold every stack
        this.#base.set(t.name, { ...t, data: sharedTensorData(base, t) });
      }
    }
  }

  /**
   * Reads the base stacks (from `shared` where given, else from the checkpoint) and opens the merge
   * graph for adapters of `lora`'s shape, on the CPU with `threads` intra-op threads.
   */
  static async create(
    model: ModelDir,
    lora: LoraShape,
    compute: ComputeDtype,
    shared: SharedWeights | null | undefined,
    threads?: number,
  ): Promise<MergedWeights> {
    const base = shared ?? await loadLinearStacks(model);
    const bytes = mergeGraph(model, lora, compute);
    const session = await openEngineSession(bytes, model.dir, { ep: "cpu", threads });
    return new MergedWeights(model, lora, compute, base, session);
  }

  /**
   * Every Linear stack by its graph input name (`stackedWeightName`), in the compute dtype, with `weights`
   * (PEFT pairs of this shape; null: the base model) merged in at `scale`.
   */
  async merged(weights: LoraWeights | null, scale: number): Promise<Map<string, HostTensor>> {
    const out = weights === null ? new Map<string, HostTensor>() : await this.#runMerge(weights, scale);
    for (const base of this.#base.values()) {
      if (!out.has(base.name)) out.set(base.name, this.#asCompute(base.data, base.dims));
    }
    return out;
  }

  /** The adapted groups' merged stacks, from one run of the merge graph. */
  async #runMerge(weights: LoraWeights, scale: number): Promise<Map<string, HostTensor>> {
    const grouped = groupedLora(this.#model.config, this.#lora, weights, scale);
    const inputs: Record<string, HostTensor> = {};
    const outputs: Record<string, HostTensor> = {};
    for (const spec of this.#specs) {
      const base = this.#base.get(stackedWeightName(spec.layer, QWEN3_LINEAR_GROUPS[spec.index]))!;
      inputs[BASE_PREFIX + base.name] = { type: "float32", data: base.data, dims: base.dims };
      inputs[spec.a.name] = { type: "float32", data: grouped.get(spec.a.name)!, dims: spec.a.dims };
      inputs[spec.b.name] = { type: "float32", data: grouped.get(spec.b.name)!, dims: spec.b.dims };
      const size = base.data.length;
      const data = this.#compute === "float16" ? new Float16Array(size) : new Float32Array(size);
      outputs[base.name] = { type: this.#compute, data, dims: base.dims } as HostTensor;
    }
    await this.#merge.run(inputs, outputs);
    return new Map(Object.entries(outputs));
  }

  close(): Promise<void> {
    return this.#merge.close();
  }

  /** A base stack in the compute dtype (float32: the base memory itself, never written). */
  #asCompute(data: Float32Array, dims: readonly number[]): HostTensor {
    return this.#compute === "float16"
      ? { type: "float16", data: Float16Array.from(data), dims }
      : { type: "float32", data, dims };
  }
}

/** The merge graph: per adapted group, `Gemm(B_g, A_g, W_g)` = `W_g + B_g·A_g`, cast to `compute`. */
function mergeGraph(model: ModelDir, lora: LoraShape, compute: ComputeDtype): Uint8Array {
  const g = new GraphBuilder("merge_adapter");
  for (const spec of loraGroupSpecs(model.config, lora)) {
    const name = stackedWeightName(spec.layer, QWEN3_LINEAR_GROUPS[spec.index]);
    const [outDim, inDim] = [spec.b.dims[0], spec.a.dims[1]];
    const w = g.input(BASE_PREFIX + name, "float32", [outDim, inDim]); // [Σout, in]
    const a = g.input(spec.a.name, "float32", spec.a.dims); // [Σr, in]
    const b = g.input(spec.b.name, "float32", spec.b.dims); // [Σout, Σr], scaled
    const merged = OPS.Gemm.emit(g, b, a, w); // [Σout, in]
    g.output(compute === "float32" ? merged : OPS.Cast.emit(g, merged, compute), name);
  }
  return g.toModel({ doc: `LoRA merge for ${model.dir}` });
}
