/**
 * Header-only reads of a safetensors file: names, dtypes, shapes and absolute byte offsets, without
 * touching tensor data (what ONNX external data needs to reference weights in place).
 *
 * Layout: `u64 little-endian header_len`, then `header_len` bytes of UTF-8 JSON
 * (`{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__"?: {string: string}}`), then the
 * data block; offsets are relative to the start of the data block.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import { DTYPE_BYTES, numel } from "./dtypes.ts";

/** Where one tensor lives in its file. */
export interface TensorInfo {
  name: string;
  dtype: string;
  shape: number[];
  /** `data_offsets` as written: relative to the start of the data block. */
  offsets: [number, number];
  /** Absolute byte offset in the file: `8 + header_len + offsets[0]` (ONNX external data `offset`). */
  fileOffset: number;
  /** `offsets[1] - offsets[0]`. */
  byteLength: number;
}

/** A parsed safetensors header. */
export interface SafetensorsHeader {
  /** The path the header was read from. */
  path: string;
  headerLen: number;
  /** `8 + headerLen`: where the data block starts. */
  dataStart: number;
  fileSize: number;
  /** `__metadata__` (string → string), empty when absent. */
  metadata: Record<string, string>;
  /** Tensors in header order. */
  tensors: Map<string, TensorInfo>;
}

/** Headers larger than this are rejected as corrupt (real checkpoints stay far below it). */
const MAX_HEADER_BYTES = 100_000_000;

/** Reads and validates the header of the safetensors file at `path`. */
export async function readHeader(path: string): Promise<SafetensorsHeader> {
  const file = await openForRead(path);
  try {
    const fileSize = (await file.stat()).size;
    const lenBytes = await readExactly(file, 0, 8);
    if (lenBytes.length < 8) {
      throw corrupt(path, fileSize, "the file is shorter than the 8-byte header length");
    }
    const headerLen64 = new DataView(lenBytes.buffer).getBigUint64(0, true);
    if (headerLen64 > BigInt(Math.min(MAX_HEADER_BYTES, fileSize - 8))) {
      throw corrupt(
        path,
        headerLen64.toString(),
        `the header length exceeds the file size (${fileSize} bytes)`,
      );
    }
    const headerLen = Number(headerLen64);
    const json = await readExactly(file, 8, headerLen);
    return parseHeader(path, json, fileSize);
  } finally {
    file.close();
  }
}

/** Parses header JSON bytes already read from `path` (exported for tests of corrupt headers). */
export function parseHeader(path: string, json: Uint8Array, fileSize: number): SafetensorsHeader {
  const headerLen = json.length;
  const dataStart = 8 + headerLen;
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(json));
  } catch (e) {
    throw corrupt(path, (e as Error).message, "the header is not valid UTF-8 JSON");
  }
  if (!isRecord(raw)) throw corrupt(path, typeof raw, "the header is not a JSON object");
  const tensors = new Map<string, TensorInfo>();
  let metadata: Record<string, string> = {};
  for (const [name, entry] of Object.entries(raw)) {
    if (name === "__metadata__") metadata = checkMetadata(path, entry);
    else tensors.set(name, checkEntry(path, name, entry, dataStart, fileSize));
  }
  return { path, headerLen, dataStart, fileSize, metadata, tensors };
}

function checkMetadata(path: string, entry: unknown): Record<string, string> {
  if (!isRecord(entry) || !Object.values(entry).every((v) => typeof v === "string")) {
    throw corrupt(path, entry, "__metadata__ must map strings to strings");
  }
  return entry as Record<string, string>;
}

function checkEntry(path: string, name: string, entry: unknown, dataStart: number, size: number): TensorInfo {
  const bad = (value: unknown, why: string) =>
    new UserError(`safetensors file ${path}: tensor "${name}"`, {
      value,
      why,
      fix: "re-download or re-export the checkpoint; the file is damaged or not a safetensors file",
    });
  if (!isRecord(entry)) throw bad(entry, "the entry is not an object");
  const { dtype, shape, data_offsets: offs } = entry;
  if (typeof dtype !== "string" || !Object.hasOwn(DTYPE_BYTES, dtype)) {
    throw bad(dtype, `unknown dtype; known: ${Object.keys(DTYPE_BYTES).join(", ")}`);
  }
  if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
    throw bad(shape, "shape must be a list of non-negative integers");
  }
  if (!Array.isArray(offs) || offs.length !== 2 || !offs.every((o) => Number.isSafeInteger(o) && o >= 0)) {
    throw bad(offs, "data_offsets must be [begin, end] with non-negative integers");
  }
  const [begin, end] = offs as [number, number];
  const expected = numel(shape) * DTYPE_BYTES[dtype];
  if (end - begin !== expected) {
    throw bad(offs, `data_offsets span ${end - begin} bytes but ${dtype}[${shape}] needs ${expected}`);
  }
  if (dataStart + end > size) {
    throw bad(offs, `the data ends at byte ${dataStart + end}, beyond the end of the file (${size} bytes)`);
  }
  return { name, dtype, shape, offsets: [begin, end], fileOffset: dataStart + begin, byteLength: expected };
}

function corrupt(path: string, value: unknown, why: string): UserError {
  return new UserError(`safetensors file ${path}`, {
    value,
    why,
    fix: "re-download or re-export the checkpoint; the file is truncated, damaged or not a safetensors file",
  });
}

function isRecord(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** Opens `path` for reading, turning a missing file into a UserError. */
export async function openForRead(path: string): Promise<Deno.FsFile> {
  try {
    return await Deno.open(path, { read: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) {
      throw new UserError(`safetensors file ${path}`, {
        why: "it does not exist",
        fix: "check the model directory path",
      });
    }
    throw e;
  }
}

/** Reads up to `length` bytes at `position` into a fresh (aligned) buffer; shorter only at end of file. */
export async function readExactly(file: Deno.FsFile, position: number, length: number): Promise<Uint8Array> {
  const out = new Uint8Array(length);
  await file.seek(position, Deno.SeekMode.Start);
  let got = 0;
  while (got < length) {
    const n = await file.read(out.subarray(got));
    if (n === null) break;
    got += n;
  }
  return got === length ? out : out.subarray(0, got);
}
