/**
 * A Qwen3 checkpoint's tensors as the graph's float32 weights, in one of two ways:
 *
 * - **folded** (default): ONNX initializers that point **into** the safetensors files (external data:
 *   no conversion, no copy on disk), cast to float32 where the checkpoint is bf16/f16, and each Linear
 *   group stacked by a Concat. The casts and concats are constant-folded when the session loads (CPU
 *   has no bf16 kernels; docs/ENGINE_FACTS.md), so every session holds its own float32 copy.
 * - **shared**: float32 initializers of the shared layout (shared_weights.ts), declared without data
 *   of their own (their external reference names the first shard and is never read). The session is
 *   given the `SharedWeights` memory for each of them (lib/engine/session.ts), so no session copies or
 *   folds anything: nothing in the graph computes on a weight before its consumer reads it.
 *
 * Either way the Linear stacks may instead be graph inputs (`linears: "inputs"`, named by
 * `stackedWeightName`, in the compute dtype): the inference graph of a policy that merges its adapter is
 * fed the adapter merged into them (lib/engine/merged_weights.ts), and declares no checkpoint data for them.
 *
 * onnxruntime resolves external `location`s against one folder (the session option
 * `model_external_initializers_file_folder_path`) and rejects absolute paths and paths escaping it, so
 * every location is made relative to the deepest folder holding all the (symlink-resolved) shards.
 *
 * @module
 */

import { dirname, relative, sep } from "node:path";
import type { GraphBuilder, Value } from "../../onnx/builder.ts";
import { SAFETENSORS_DTYPE } from "../../onnx/dtype.ts";
import { OPS } from "../../onnx/ops.ts";
import { UserError } from "../../errors.ts";
import { attentionScale } from "../hf_config.ts";
import type { QwenLinear } from "../lora.ts";
import type { ModelDir } from "../model_dir.ts";
import { linearPath, linearShape, qwen3Weights } from "../model_dir.ts";
import {
  checkSharedWeights,
  headNormsName,
  type SharedTensor,
  type SharedWeights,
  stackedWeightName,
} from "../shared_weights.ts";

/**
 * The Values of a checkpoint's weights and where they live: norm weights in float32, the Linears and the
 * embedding in the compute dtype (float32, or float16 on a GPU provider; graph/forms.ts).
 */
export interface GraphWeights {
  /** A norm weight (float32), the embedding or the head (compute dtype), by Hugging Face name. */
  get(name: string): Value;
  /** The tensor in float32 whatever the compute dtype (the head: logits and log-probs stay float32). */
  float32(name: string): Value;
  /** The `[Σout, in]` stack of a layer's Linears that read the same input (one Linear: its weight). */
  linears(layer: number, group: readonly QwenLinear[]): Value;
  /**
   * A layer's `[nH + nKV, 1, D]` float32 head-norm weights, q's times the attention's `1/sqrt(D)` per
   * query head then k's (`headNormsName`), to scale `[B, heads, T, D]` activations.
   */
  headNorms(layer: number): Value;
  /** The folder every external `location` is relative to (a session option). */
  folder: string;
  /** Shared mode: the shared tensors this graph declared (the session must be given each of them). */
  shared: SharedTensor[];
}

/** Where the Linear stacks come from: the checkpoint (folded or shared), or graph inputs. */
export type LinearSource = "checkpoint" | "inputs";

/**
 * Adds every Qwen3 weight of `model` to `g`: folded from the checkpoint, or read from `shared` (float32
 * compute only: shared weights are for CPU sessions); the Linear stacks as inputs where `linears` says so.
 */
export function addCheckpointWeights(
  g: GraphBuilder,
  model: ModelDir,
  shared?: SharedWeights,
  compute: "float32" | "float16" = "float32",
  linears: LinearSource = "checkpoint",
): GraphWeights {
  const folder = commonFolder(model.checkpoint.files);
  if (shared && compute !== "float32") {
    throw new Error("graph weights: shared weights are float32 (CPU) only");
  }
  const weights = shared
    ? sharedGraphWeights(g, model, folder, shared)
    : foldedGraphWeights(g, model, folder, compute, linears === "checkpoint");
  return linears === "checkpoint" ? weights : { ...weights, linears: linearInputs(g, model, compute) };
}

/** Each Linear stack as a graph input `[Σout, in]` in `compute`, declared on first use. */
function linearInputs(
  g: GraphBuilder,
  model: ModelDir,
  compute: "float32" | "float16",
): GraphWeights["linears"] {
  const declared = new Map<string, Value>();
  return (layer, group) => {
    const name = stackedWeightName(layer, group);
    let value = declared.get(name);
    if (!value) {
      const rows = group.reduce((n, linear) => n + linearShape(model.config, linear)[0], 0);
      declared.set(name, value = g.input(name, compute, [rows, linearShape(model.config, group[0])[1]]));
    }
    return value;
  };
}

function foldedGraphWeights(
  g: GraphBuilder,
  model: ModelDir,
  folder: string,
  compute: "float32" | "float16",
  withLinears: boolean,
): GraphWeights {
  const { checkpoint } = model;
  const values = new Map<string, Value>();
  const raws = new Map<string, Value>();
  for (const spec of qwen3Weights(model.config)) {
    if (spec.kind === "matrix" && !withLinears) continue; // fed as inputs instead
    const info = checkpoint.tensors.get(spec.name)!; // openModelDir checked presence and shape
    const dtype = SAFETENSORS_DTYPE[info.dtype];
    const location = relative(folder, info.file).split(sep).join("/");
    const raw = g.external(spec.name, dtype, info.shape, {
      location,
      offset: info.fileOffset,
      length: info.byteLength,
    });
    const to = spec.kind === "norm" ? "float32" : compute; // norm weights stay float32 (decoder.ts casts them, folded)
    raws.set(spec.name, raw);
    values.set(spec.name, dtype === to ? raw : OPS.Cast.emit(g, raw, to));
  }
  const get = (name: string): Value => {
    const value = values.get(name);
    if (!value) throw new Error(`graph weights: no tensor ${name} in ${model.dir}`);
    return value;
  };
  const wide = new Map<string, Value>(); // float32 copies where the compute dtype is narrower
  return {
    folder,
    shared: [],
    get,
    float32(name) {
      const value = get(name);
      if (value.dtype === "float32") return value;
      let w = wide.get(name);
      if (!w) {
        const raw = raws.get(name)!;
        wide.set(name, w = raw.dtype === "float32" ? raw : OPS.Cast.emit(g, raw, "float32"));
      }
      return w;
    },
    linears(layer, group) {
      const members = group.map((linear) => get(`${linearPath(layer, linear)}.weight`));
      return members.length === 1 ? members[0] : OPS.Concat.emit(g, members, 0); // [Σout, in], folded
    },
    headNorms(layer) {
      const { num_attention_heads: nH, num_key_value_heads: nKV, head_dim: D } = model.config;
      const weight = (which: string) => get(`model.layers.${layer}.self_attn.${which}.weight`); // [D]
      const q = OPS.Expand.emit(g, OPS.Mul.emit(g, weight("q_norm"), attentionScale(D)), [nH, 1, D]); // [nH, 1, D]
      const k = OPS.Expand.emit(g, weight("k_norm"), [nKV, 1, D]); // [nKV, 1, D]
      return OPS.Concat.emit(g, [q, k], 0); // [nH+nKV, 1, D], folded
    },
  };
}

function sharedGraphWeights(
  g: GraphBuilder,
  model: ModelDir,
  folder: string,
  weights: SharedWeights,
): GraphWeights {
  checkSharedWeights(weights, model);
  const byName = new Map(weights.tensors.map((t) => [t.name, t]));
  const location = relative(folder, model.checkpoint.files[0]).split(sep).join("/");
  const declared = new Map<string, Value>();
  const shared: SharedTensor[] = [];
  const get = (name: string): Value => {
    let value = declared.get(name);
    if (value) return value;
    const t = byName.get(name);
    if (!t) throw new Error(`graph weights: no shared tensor ${name} for ${model.dir}`);
    // A placeholder: the session is given the shared memory instead (AddInitializer); never read.
    value = g.external(name, "float32", t.dims, { location, offset: 0, length: 4 * numel(t.dims) });
    declared.set(name, value);
    shared.push(t);
    return value;
  };
  return {
    folder,
    shared,
    get,
    float32: get,
    linears: (layer, group) => get(stackedWeightName(layer, group)),
    headNorms: (layer) => get(headNormsName(layer)),
  };
}

function numel(dims: readonly number[]): number {
  return dims.reduce((a, b) => a * b, 1);
}

/** The deepest folder containing every file (the files are absolute, symlinks resolved). */
export function commonFolder(files: readonly string[]): string {
  if (files.length === 0) throw new Error("commonFolder: no files");
  let folder = dirname(files[0]);
  while (!files.every((f) => f.startsWith(folder.endsWith(sep) ? folder : folder + sep))) {
    const parent = dirname(folder);
    if (parent === folder) {
      throw new UserError(`checkpoint files ${files.join(", ")}`, {
        why: "they share no folder onnxruntime could read them from",
        fix: "put the shards in one directory",
      });
    }
    folder = parent;
  }
  return folder;
}
