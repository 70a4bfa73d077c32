/**
 * safetensors element types: sizes, typed-array views, and float16 / bfloat16 conversions.
 *
 * Byte order is little-endian, as the format requires; typed arrays are used directly, which assumes a
 * little-endian host (x86-64 and ARM64, every machine this toolkit targets).
 *
 * @module
 */

/** Element types this toolkit can write (and read as typed arrays). */
export type WritableDType = "F32" | "F16" | "BF16" | "I64" | "I32" | "U8";

/** Bytes per element of every dtype the safetensors format defines (reads accept all of them). */
export const DTYPE_BYTES: Readonly<Record<string, number>> = {
  F64: 8,
  F32: 4,
  F16: 2,
  BF16: 2,
  I64: 8,
  I32: 4,
  I16: 2,
  I8: 1,
  U64: 8,
  U32: 4,
  U16: 2,
  U8: 1,
  BOOL: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
};

/** The dtypes `writeSafetensors` accepts. */
export const WRITABLE_DTYPES: readonly WritableDType[] = ["F32", "F16", "BF16", "I64", "I32", "U8"];

/** Typed arrays a tensor's values can arrive in or be returned as. */
export type TensorValues =
  | Float64Array
  | Float32Array
  | Uint16Array
  | Int16Array
  | BigInt64Array
  | BigUint64Array
  | Int32Array
  | Uint32Array
  | Int8Array
  | Uint8Array;

/** Whether `dtype` is a floating-point type that `readTensor` can widen to Float32Array. */
export function isFloatDType(dtype: string): boolean {
  return dtype === "F32" || dtype === "F16" || dtype === "BF16" || dtype === "F64";
}

/** Number of elements of a shape (1 for a scalar `[]`). */
export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Views `bytes` (an exact, 8-byte-aligned buffer) as the typed array native to `dtype`. */
export function viewAs(dtype: string, bytes: Uint8Array): TensorValues {
  const { buffer, byteOffset, byteLength } = bytes;
  const n = byteLength / (DTYPE_BYTES[dtype] ?? 1);
  switch (dtype) {
    case "F64":
      return new Float64Array(buffer, byteOffset, n);
    case "F32":
      return new Float32Array(buffer, byteOffset, n);
    case "F16":
    case "BF16":
    case "U16":
      return new Uint16Array(buffer, byteOffset, n);
    case "I16":
      return new Int16Array(buffer, byteOffset, n);
    case "I64":
      return new BigInt64Array(buffer, byteOffset, n);
    case "U64":
      return new BigUint64Array(buffer, byteOffset, n);
    case "I32":
      return new Int32Array(buffer, byteOffset, n);
    case "U32":
      return new Uint32Array(buffer, byteOffset, n);
    case "I8":
      return new Int8Array(buffer, byteOffset, n);
    default: // U8, BOOL, F8_*: raw bytes
      return new Uint8Array(buffer, byteOffset, n);
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Raw float32 bits of `x` (after rounding it to float32). */
export function f32Bits(x: number): number {
  f32[0] = x;
  return u32[0];
}

/** The float32 whose raw bits are `bits`. */
export function f32FromBits(bits: number): number {
  u32[0] = bits >>> 0;
  return f32[0];
}

/**
 * float32 bits → bfloat16 bits, rounding to nearest, ties to even. NaN stays NaN (the quiet bit is
 * set, so a NaN whose payload sits only in the dropped low bits does not turn into infinity); values
 * above bf16's range round to ±infinity as IEEE rounding does.
 */
export function bf16FromF32Bits(bits: number): number {
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x0040) & 0xffff;
  const lsb = (bits >>> 16) & 1;
  return ((bits + 0x7fff + lsb) >>> 16) & 0xffff;
}

/** bfloat16 bits → float32 bits (exact). */
export function f32BitsFromBf16(h: number): number {
  return (h << 16) >>> 0;
}

/**
 * float32 bits → IEEE half-precision bits, rounding to nearest, ties to even, with subnormals,
 * overflow to ±infinity and NaN kept NaN (quiet bit set).
 */
export function f16FromF32Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const exp = (bits >>> 23) & 0xff;
  const mant = bits & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x0200 | (mant >>> 13) : 0);
  const e = exp - 112; // rebias 127 → 15
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) return sign | subnormalHalf(mant | 0x800000, 14 - e);
  const half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  // A carry out of the mantissa correctly bumps the exponent (up to infinity).
  const up = rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1) ? 1 : 0;
  return sign | (half + up);
}

/** The half subnormal (or smallest normal after rounding) for a 24-bit significand shifted right. */
function subnormalHalf(significand: number, shift: number): number {
  if (shift > 24) return 0; // below half the smallest subnormal
  const q = significand >>> shift;
  const rest = significand & ((1 << shift) - 1);
  const halfway = 1 << (shift - 1);
  return q + (rest > halfway || (rest === halfway && (q & 1) === 1) ? 1 : 0);
}

/** IEEE half-precision bits → float32 bits (exact). */
export function f32BitsFromF16(h: number): number {
  const sign = (h & 0x8000) << 16;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return (sign | 0x7f800000 | (mant << 13)) >>> 0;
  if (exp !== 0) return (sign | ((exp + 112) << 23) | (mant << 13)) >>> 0;
  if (mant === 0) return sign >>> 0;
  // Subnormal: normalise the mantissa.
  let e = 113;
  let m = mant;
  while ((m & 0x400) === 0) {
    m <<= 1;
    e--;
  }
  return (sign | (e << 23) | ((m & 0x3ff) << 13)) >>> 0;
}

/** Writes `src[from .. from+out.length)` into `out` as 16-bit floats of `dtype` (F16 or BF16). */
export function encodeHalf(dtype: "F16" | "BF16", src: Float32Array, from: number, out: Uint16Array): void {
  const bitsOf = new Uint32Array(src.buffer, src.byteOffset, src.length);
  const conv = dtype === "BF16" ? bf16FromF32Bits : f16FromF32Bits;
  for (let i = 0; i < out.length; i++) out[i] = conv(bitsOf[from + i]);
}

/** Widens 16-bit floats of `dtype` (F16 or BF16) to a new Float32Array. */
export function decodeHalf(dtype: "F16" | "BF16", src: Uint16Array): Float32Array {
  const out = new Float32Array(src.length);
  const bits = new Uint32Array(out.buffer);
  const conv = dtype === "BF16" ? f32BitsFromBf16 : f32BitsFromF16;
  for (let i = 0; i < src.length; i++) bits[i] = conv(src[i]);
  return out;
}
