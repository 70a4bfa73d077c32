/**
 * A Qwen3 checkpoint's tensors as ONNX initializers that point **into** its safetensors files
 * (external data: no conversion, no copy on disk), cast to float32 where the checkpoint is bf16/f16.
 *
 * onnxruntime resolves external `location`s against one folder (the session option
 * `model_external_initializers_file_folder_path`) and rejects absolute paths and paths escaping it, so
 * every location is made relative to the deepest folder holding all the (symlink-resolved) shards.
 * The casts are constant-folded when the session loads (CPU has no bf16 kernels; docs/ENGINE_FACTS.md):
 * expect float32 copies of the weights in RAM.
 *
 * @module
 */

import { dirname, relative, sep } from "node:path";
import type { GraphBuilder, Value } from "../../onnx/builder.ts";
import { SAFETENSORS_DTYPE } from "../../onnx/dtype.ts";
import { OPS } from "../../onnx/ops.ts";
import { UserError } from "../../errors.ts";
import type { ModelDir } from "../model_dir.ts";
import { qwen3Weights } from "../model_dir.ts";

/** The float32 Values of a checkpoint's weights, by Hugging Face name, and where they live. */
export interface GraphWeights {
  /** Float32 value of each weight (the initializer itself, or its Cast). */
  get(name: string): Value;
  /** The folder every external `location` is relative to (a session option). */
  folder: string;
}

/** Adds every Qwen3 weight of `model` to `g` as external data, cast to float32 where needed. */
export function addCheckpointWeights(g: GraphBuilder, model: ModelDir): GraphWeights {
  const { checkpoint } = model;
  const folder = commonFolder(checkpoint.files);
  const values = new Map<string, Value>();
  for (const spec of qwen3Weights(model.config)) {
    const info = checkpoint.tensors.get(spec.name)!; // openModelDir checked presence and shape
    const dtype = SAFETENSORS_DTYPE[info.dtype];
    const location = relative(folder, info.file).split(sep).join("/");
    const raw = g.external(spec.name, dtype, info.shape, {
      location,
      offset: info.fileOffset,
      length: info.byteLength,
    });
    values.set(spec.name, dtype === "float32" ? raw : OPS.Cast.emit(g, raw, "float32"));
  }
  return {
    folder,
    get(name: string): Value {
      const value = values.get(name);
      if (!value) throw new Error(`graph weights: no tensor ${name} in ${model.dir}`);
      return value;
    },
  };
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
