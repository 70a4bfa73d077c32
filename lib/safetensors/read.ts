/**
 * Reading tensor data from a safetensors file, one tensor at a time.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { decodeHalf, isFloatDType, type TensorValues, viewAs } from "./dtypes.ts";
import { openForRead, readExactly, readHeader, type SafetensorsHeader, type TensorInfo } from "./header.ts";

/** A tensor read from a file. */
export interface Tensor {
  dtype: string;
  shape: number[];
  /**
   * Values: Float32Array for F32 (and for F16 / BF16 / F64 with `asFloat32`), Uint16Array raw bits for
   * F16 / BF16 otherwise, BigInt64Array for I64, Int32Array for I32, Uint8Array for U8 / BOOL / F8.
   */
  data: TensorValues;
}

/** Options of `readTensor`. */
export interface ReadOptions {
  /** Widen floating-point tensors (F16, BF16, F64) to Float32Array. */
  asFloat32?: boolean;
}

/**
 * Reads tensor `name` from `source` (a path, or a header from `readHeader` to skip re-reading it).
 * Only that tensor's bytes are read.
 */
export async function readTensor(
  source: string | SafetensorsHeader,
  name: string,
  options: ReadOptions = {},
): Promise<Tensor> {
  const header = typeof source === "string" ? await readHeader(source) : source;
  const info = header.tensors.get(name);
  if (!info) {
    throw new UserError(`safetensors file ${header.path}: tensor "${name}"`, {
      why: `it is not in the file (${header.tensors.size} tensors there)`,
      fix: "check the tensor name, or the index file that points to this shard",
    });
  }
  const file = await openForRead(header.path);
  try {
    return await readInfo(file, header.path, info, options);
  } finally {
    file.close();
  }
}

/** Reads the tensor described by `info` from an open file. */
export async function readInfo(
  file: Deno.FsFile,
  path: string,
  info: TensorInfo,
  options: ReadOptions = {},
): Promise<Tensor> {
  const bytes = await readExactly(file, info.fileOffset, info.byteLength);
  if (bytes.length !== info.byteLength) {
    throw new UserError(`safetensors file ${path}: tensor "${info.name}"`, {
      why: `the file ends after ${bytes.length} of its ${info.byteLength} bytes`,
      fix: "re-download or re-export the checkpoint; the file is truncated",
    });
  }
  const raw = viewAs(info.dtype, bytes);
  return { dtype: info.dtype, shape: [...info.shape], data: widen(info.dtype, raw, options) };
}

function widen(dtype: string, raw: TensorValues, options: ReadOptions): TensorValues {
  if (!options.asFloat32 || !isFloatDType(dtype) || dtype === "F32") return raw;
  if (dtype === "F64") return Float32Array.from(raw as Float64Array);
  return decodeHalf(dtype as "F16" | "BF16", raw as Uint16Array);
}
