/**
 * Element types: the names onnxruntime-node uses for tensors, mapped to ONNX `TensorProto.DataType`.
 */

/** An element type, named as `ort.Tensor` names it (plus `bfloat16`, which cannot cross the binding). */
export type DType =
  | "float32"
  | "float16"
  | "bfloat16"
  | "float64"
  | "int64"
  | "int32"
  | "int16"
  | "int8"
  | "uint8"
  | "uint16"
  | "uint32"
  | "uint64"
  | "bool";

/** ONNX `TensorProto.DataType` enum values. */
export const ONNX_DTYPE: Readonly<Record<DType, number>> = {
  float32: 1,
  uint8: 2,
  int8: 3,
  uint16: 4,
  int16: 5,
  int32: 6,
  int64: 7,
  bool: 9,
  float16: 10,
  float64: 11,
  uint32: 12,
  uint64: 13,
  bfloat16: 16,
};

/** Bytes per element. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = {
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float64: 8,
  int64: 8,
  int32: 4,
  int16: 2,
  int8: 1,
  uint8: 1,
  uint16: 2,
  uint32: 4,
  uint64: 8,
  bool: 1,
};

/** The safetensors dtype names (`F32`, `BF16`, …) of our types, for weights referenced in place. */
export const SAFETENSORS_DTYPE: Readonly<Record<string, DType>> = {
  F32: "float32",
  F16: "float16",
  BF16: "bfloat16",
  F64: "float64",
  I64: "int64",
  I32: "int32",
  I16: "int16",
  I8: "int8",
  U8: "uint8",
  U16: "uint16",
  U32: "uint32",
  U64: "uint64",
  BOOL: "bool",
};

/** Typed arrays the builder accepts as inline tensor data. */
export type TensorArray =
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array
  | Int32Array
  | Int16Array
  | Int8Array
  | Uint8Array
  | Uint16Array
  | Uint32Array;

/**
 * The dtype a typed array holds. `Uint16Array` is ambiguous (uint16, float16, bfloat16) and
 * `Uint8Array` may hold bools, so callers pass `dtype` explicitly for those.
 */
export function dtypeOfArray(data: TensorArray): DType {
  if (data instanceof Float32Array) return "float32";
  if (data instanceof Float64Array) return "float64";
  if (data instanceof BigInt64Array) return "int64";
  if (data instanceof BigUint64Array) return "uint64";
  if (data instanceof Int32Array) return "int32";
  if (data instanceof Int16Array) return "int16";
  if (data instanceof Int8Array) return "int8";
  if (data instanceof Uint8Array) return "uint8";
  if (data instanceof Uint16Array) return "uint16";
  return "uint32";
}

/** True for the floating-point types. */
export function isFloat(dtype: DType): boolean {
  return dtype === "float32" || dtype === "float16" || dtype === "bfloat16" || dtype === "float64";
}

/** Little-endian bytes of a typed array (x86 and ARM hosts are little-endian, as ONNX raw_data is). */
export function rawBytes(data: TensorArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** The typed array of `values` in `dtype` (bools as 0/1 bytes; float16 as its bits, rounded to nearest). */
export function arrayOf(dtype: DType, values: readonly number[]): TensorArray {
  switch (dtype) {
    case "float32":
      return new Float32Array(values);
    case "float64":
      return new Float64Array(values);
    case "int64":
      return BigInt64Array.from(values, (v) => BigInt(v));
    case "uint64":
      return BigUint64Array.from(values, (v) => BigInt(v));
    case "int32":
      return new Int32Array(values);
    case "int16":
      return new Int16Array(values);
    case "int8":
      return new Int8Array(values);
    case "uint8":
    case "bool":
      return new Uint8Array(values.map((v) => (dtype === "bool" ? (v ? 1 : 0) : v)));
    case "uint16":
      return new Uint16Array(values);
    case "uint32":
      return new Uint32Array(values);
    case "float16":
      return new Uint16Array(new Float16Array(values).buffer);
    default:
      throw new Error(`arrayOf: ${dtype} constants need their bits as a Uint16Array`);
  }
}
