/**
 * `SharedWeights`: a Qwen3 checkpoint's weights as float32, loaded once per process into one
 * SharedArrayBuffer, in the layout the graphs consume them (decoder.ts): every Linear group of a layer
 * (q/k/v, o, gate/up, down) as one stacked `[Σout, in]` matrix, norms and the embedding as they are.
 *
 * Sessions built over it (the inference engine, also inside its Worker, and the trainer) read these
 * bytes through onnxruntime's AddInitializer instead of folding their own float32 copies of a bf16
 * checkpoint (lib/engine/session.ts), so a process holding both holds one copy of the weights. The
 * object is plain data: post it to a Worker as is (the buffer is shared, not copied).
 *
 * Conversion is exact and matches onnxruntime's Cast: a bf16 value is its bits shifted left by 16, an
 * f16 value is widened exactly, f32 is copied.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { f32BitsFromF16 } from "../safetensors/dtypes.ts";
import type { TensorLocation } from "../safetensors/sharded.ts";
import { attentionScale, type Qwen3Config } from "./hf_config.ts";
import type { QwenLinear } from "./lora.ts";
import { linearPath, linearShape, type ModelDir, QWEN3_LINEAR_GROUPS, qwen3Weights } from "./model_dir.ts";

/** One float32 tensor inside the shared buffer. */
export interface SharedTensor {
  /** Graph initializer name: the checkpoint name, `stackedWeightName` for a Linear group, or `headNormsName`. */
  name: string;
  dims: number[];
  /** Byte offset in the buffer (64-byte aligned). */
  offset: number;
  /** The checkpoint tensors stacked along the first axis, in order (one for an unstacked weight). */
  sources: string[];
  /** A factor for each source, applied as it is read (absent: all 1). */
  factors?: number[];
}

/** A model's float32 weights in one shared buffer. */
export interface SharedWeights {
  /** The model directory they were read from (absolute). */
  dir: string;
  buffer: SharedArrayBuffer;
  tensors: SharedTensor[];
}

/** Name of the stacked `[Σout, in]` weight of a Linear group, e.g. `model.layers.0.self_attn.q_proj+k_proj+v_proj.weight`. */
export function stackedWeightName(layer: number, group: readonly QwenLinear[]): string {
  if (group.length === 1) return `${linearPath(layer, group[0])}.weight`;
  return `${linearPath(layer, group[0])}+${group.slice(1).join("+")}.weight`;
}

/**
 * Name of the `[nH + nKV, 1, D]` head-norm weight of a layer: q_norm's weight times the attention's
 * `1/sqrt(D)` once per query head, then k_norm's once per key/value head (the train graph normalizes q
 * and k in one kernel, and its scores need no scaling kernel: decoder.ts, lib/train/attention.ts).
 */
export function headNormsName(layer: number): string {
  return `model.layers.${layer}.self_attn.q_norm+k_norm.weight`;
}

const ALIGN = 64;

/** The tensors of `cfg` in shared layout, with their offsets, and the buffer size they need. */
export function sharedLayout(cfg: Qwen3Config): { tensors: SharedTensor[]; bytes: number } {
  const specs: Omit<SharedTensor, "offset">[] = [];
  for (const w of qwen3Weights(cfg)) {
    if (w.kind !== "matrix") specs.push({ name: w.name, dims: w.shape, sources: [w.name] });
  }
  return placed([...specs, ...linearStackSpecs(cfg), ...headNormSpecs(cfg)]);
}

/** Every Linear group's stack `[Σout, in]`, layer by layer, in QWEN3_LINEAR_GROUPS order. */
function linearStackSpecs(cfg: Qwen3Config): Omit<SharedTensor, "offset">[] {
  const specs: Omit<SharedTensor, "offset">[] = [];
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    for (const group of QWEN3_LINEAR_GROUPS) {
      const rows = group.reduce((n, linear) => n + linearShape(cfg, linear)[0], 0);
      specs.push({
        name: stackedWeightName(layer, group),
        dims: [rows, linearShape(cfg, group[0])[1]],
        sources: group.map((linear) => `${linearPath(layer, linear)}.weight`),
      });
    }
  }
  return specs;
}

/** Each layer's q and k head-norm weights as one `[nH + nKV, 1, D]` tensor (the train graph's packed norm). */
function headNormSpecs(cfg: Qwen3Config): Omit<SharedTensor, "offset">[] {
  const specs: Omit<SharedTensor, "offset">[] = [];
  for (let layer = 0; layer < cfg.num_hidden_layers; layer++) {
    const norm = (which: string, heads: number) =>
      Array(heads).fill(`model.layers.${layer}.self_attn.${which}.weight`);
    const [nH, nKV] = [cfg.num_attention_heads, cfg.num_key_value_heads];
    specs.push({
      name: headNormsName(layer),
      dims: [nH + nKV, 1, cfg.head_dim],
      sources: [...norm("q_norm", nH), ...norm("k_norm", nKV)],
      factors: [...Array(nH).fill(attentionScale(cfg.head_dim)), ...Array(nKV).fill(1)],
    });
  }
  return specs;
}

/** `specs` one after the other, each 64-byte aligned, and the bytes they need. */
function placed(specs: Omit<SharedTensor, "offset">[]): { tensors: SharedTensor[]; bytes: number } {
  let bytes = 0;
  const tensors = specs.map((spec) => {
    const offset = bytes;
    bytes += Math.ceil((4 * spec.dims.reduce((a, b) => a * b, 1)) / ALIGN) * ALIGN;
    return { ...spec, offset };
  });
  return { tensors, bytes };
}

/** Reads every weight of `model` once, converting to float32 (seconds for a large model). */
export function loadSharedWeights(model: ModelDir): Promise<SharedWeights> {
  return loadLayout(model, sharedLayout(model.config));
}

/**
 * Only the Linear stacks of `model`, in float32, laid out as in `SharedWeights` (what the inference engine
 * merges an adapter into when no shared weights are given: lib/engine/merged_weights.ts).
 */
export function loadLinearStacks(model: ModelDir): Promise<SharedWeights> {
  return loadLayout(model, placed(linearStackSpecs(model.config)));
}

async function loadLayout(
  model: ModelDir,
  { tensors, bytes }: { tensors: SharedTensor[]; bytes: number },
): Promise<SharedWeights> {
  const buffer = new SharedArrayBuffer(bytes);
  const reader = new ChunkReader();
  try {
    for (const t of tensors) {
      let at = t.offset;
      for (const [i, name] of t.sources.entries()) {
        const source = model.checkpoint.tensors.get(name)!; // openModelDir checked presence and shape
        const from = at;
        at = await reader.readFloat32(source, buffer, at);
        const factor = t.factors?.[i] ?? 1;
        if (factor !== 1) {
          new Float32Array(buffer, from, (at - from) / 4).forEach((v, j, a) => a[j] = v * factor);
        }
      }
    }
  } finally {
    reader.close();
  }
  return { dir: model.dir, buffer, tensors };
}

/** The float32 view of a shared tensor. */
export function sharedTensorData(weights: SharedWeights, tensor: SharedTensor): Float32Array {
  return new Float32Array(weights.buffer, tensor.offset, tensor.dims.reduce((a, b) => a * b, 1));
}

/** Throws when `weights` were not loaded from `model` (a bug of the caller: the shapes would not match). */
export function checkSharedWeights(weights: SharedWeights, model: ModelDir): void {
  const expected = sharedLayout(model.config);
  const same = weights.dir === model.dir && weights.buffer.byteLength === expected.bytes &&
    weights.tensors.length === expected.tensors.length;
  if (!same) {
    throw new UserError(`shared weights of ${weights.dir}`, {
      why: `they were loaded for another model than ${model.dir}`,
      fix: "load the shared weights from the model the sessions are built for",
    });
  }
}

const CHUNK_BYTES = 64 << 20;

/** Reads checkpoint tensors in chunks through one reusable buffer, converting them to float32. */
class ChunkReader {
  readonly #files = new Map<string, Deno.FsFile>();
  readonly #chunk = new Uint8Array(CHUNK_BYTES);

  /** Writes `source` as float32 into `buffer` at byte `at`; returns the byte after it. */
  async readFloat32(source: TensorLocation, buffer: SharedArrayBuffer, at: number): Promise<number> {
    const file = await this.#open(source.file);
    const width = source.dtype === "F32" ? 4 : 2;
    const elements = source.byteLength / width;
    const out = new Uint32Array(buffer, at, elements);
    await file.seek(source.fileOffset, Deno.SeekMode.Start);
    for (let done = 0; done < elements;) {
      const n = Math.min(elements - done, CHUNK_BYTES / 4);
      if (width === 4) {
        await readFull(file, new Uint8Array(buffer, at + 4 * done, 4 * n), source);
      } else {
        await readFull(file, this.#chunk.subarray(0, 2 * n), source);
        widen(source.dtype, new Uint16Array(this.#chunk.buffer, 0, n), out.subarray(done, done + n));
      }
      done += n;
    }
    return at + 4 * elements;
  }

  close(): void {
    for (const file of this.#files.values()) file.close();
    this.#files.clear();
  }

  async #open(path: string): Promise<Deno.FsFile> {
    let file = this.#files.get(path);
    if (!file) this.#files.set(path, file = await Deno.open(path, { read: true }));
    return file;
  }
}

/** 16-bit floats (bits) to float32 bits. */
function widen(dtype: string, half: Uint16Array, out: Uint32Array): void {
  if (dtype === "BF16") {
    for (let i = 0; i < half.length; i++) out[i] = half[i] << 16;
  } else {
    for (let i = 0; i < half.length; i++) out[i] = f32BitsFromF16(half[i]);
  }
}

async function readFull(file: Deno.FsFile, into: Uint8Array, source: TensorLocation): Promise<void> {
  for (let got = 0; got < into.length;) {
    const n = await file.read(into.subarray(got));
    if (n === null) {
      throw new UserError(`checkpoint file ${source.file}: tensor "${source.name}"`, {
        why: "the file ends before the tensor's data does",
        fix: "re-download or re-export the checkpoint; the file is truncated",
      });
    }
    got += n;
  }
}
