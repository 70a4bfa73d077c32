/**
 * Streaming, atomic safetensors writer: the header is computed from names, dtypes and shapes alone,
 * then tensors are produced and written one at a time, so peak memory is one tensor (plus a small
 * conversion buffer), never the whole checkpoint.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import {
  DTYPE_BYTES,
  encodeHalf,
  numel,
  type TensorValues,
  WRITABLE_DTYPES,
  type WritableDType,
} from "./dtypes.ts";
import { writeAll, writeFileAtomic } from "../fs/atomic.ts";

/** One tensor to write. */
export interface TensorToWrite {
  name: string;
  dtype: WritableDType;
  shape: number[];
  /**
   * The values, or a function producing them when the writer reaches this tensor (keeps memory at one
   * tensor). F32 takes Float32Array; F16 / BF16 take Float32Array (converted, round to nearest even)
   * or Uint16Array (raw bits); I64 BigInt64Array; I32 Int32Array; U8 Uint8Array.
   */
  data: TensorValues | (() => TensorValues | Promise<TensorValues>);
}

/** Elements converted per chunk for F16 / BF16 (keeps the conversion buffer at 2 MiB). */
const CHUNK = 1 << 20;

/** Writes `tensors` (in order) to `path` atomically, with optional `__metadata__`. */
export async function writeSafetensors(
  path: string,
  tensors: readonly TensorToWrite[],
  metadata?: Record<string, string>,
): Promise<void> {
  const header = encodeHeader(path, tensors, metadata);
  const bytes = tensors.reduce((n, t) => n + tensorBytes(t), header.length);
  await writeFileAtomic(path, async (file) => {
    await writeAll(file, header);
    for (const t of tensors) {
      const values = typeof t.data === "function" ? await t.data() : t.data;
      await writeValues(file, path, t, values);
    }
  }, { bytes });
}

/** Bytes one tensor takes in the data block. */
export function tensorBytes(t: Pick<TensorToWrite, "dtype" | "shape">): number {
  return numel(t.shape) * DTYPE_BYTES[t.dtype];
}

/** `u64 header_len` + header JSON padded with spaces to a multiple of 8 (so data starts aligned). */
function encodeHeader(path: string, tensors: readonly TensorToWrite[], metadata?: Record<string, string>) {
  const header: Record<string, unknown> = {};
  if (metadata && Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of tensors) {
    checkSpec(path, t, header);
    const size = tensorBytes(t);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  const json = new TextEncoder().encode(JSON.stringify(header));
  const padded = Math.ceil(json.length / 8) * 8;
  const out = new Uint8Array(8 + padded).fill(0x20);
  new DataView(out.buffer).setBigUint64(0, BigInt(padded), true);
  out.set(json, 8);
  return out;
}

function checkSpec(path: string, t: TensorToWrite, seen: Record<string, unknown>): void {
  const bad = (value: unknown, why: string, fix: string) =>
    new UserError(`writing safetensors ${path}: tensor "${t.name}"`, { value, why, fix });
  if (t.name === "__metadata__" || Object.hasOwn(seen, t.name)) {
    throw bad(t.name, "the name is reserved or used twice", "give every tensor a unique name");
  }
  if (!WRITABLE_DTYPES.includes(t.dtype)) {
    throw bad(t.dtype, "unsupported dtype", `use one of ${WRITABLE_DTYPES.join(", ")}`);
  }
  if (!t.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw bad(t.shape, "shape must hold non-negative integers", "fix the shape");
  }
}

/** Checks `values` against the tensor's dtype and shape, then writes its bytes. */
async function writeValues(file: Deno.FsFile, path: string, t: TensorToWrite, values: TensorValues) {
  const n = numel(t.shape);
  const bad = (why: string) =>
    new UserError(`writing safetensors ${path}: tensor "${t.name}"`, {
      value: `${values.constructor.name}(${values.length})`,
      why,
      fix: `pass ${n} values in the typed array that matches ${t.dtype}`,
    });
  if (values.length !== n) throw bad(`${t.dtype}[${t.shape}] needs ${n} values`);
  const half = t.dtype === "F16" || t.dtype === "BF16";
  if (half && values instanceof Float32Array) return await writeHalf(file, t.dtype as "F16" | "BF16", values);
  if (!(values instanceof NATIVE[t.dtype])) throw bad(`a ${t.dtype} tensor takes ${NATIVE[t.dtype].name}`);
  await writeAll(file, new Uint8Array(values.buffer, values.byteOffset, values.byteLength));
}

/** The typed array whose bytes are a dtype's bytes as they are. */
const NATIVE: Record<WritableDType, { new (n: number): TensorValues; name: string }> = {
  F32: Float32Array,
  F16: Uint16Array,
  BF16: Uint16Array,
  I64: BigInt64Array,
  I32: Int32Array,
  U8: Uint8Array,
};

/** Converts float32 values to F16 / BF16 in chunks and writes them. */
async function writeHalf(file: Deno.FsFile, dtype: "F16" | "BF16", values: Float32Array) {
  const buf = new Uint16Array(Math.min(CHUNK, values.length));
  for (let from = 0; from < values.length; from += CHUNK) {
    const out = buf.subarray(0, Math.min(CHUNK, values.length - from));
    encodeHalf(dtype, values, from, out);
    await writeAll(file, new Uint8Array(out.buffer, 0, out.byteLength));
  }
}
