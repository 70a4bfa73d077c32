/**
 * `OrtTensor`: an onnxruntime `OrtValue` over a JS typed array's own memory (CreateTensorWithDataAsOrtValue),
 * used as a Run input or as a pre-allocated Run output. Nothing is copied either way: onnxruntime reads
 * inputs from, and writes outputs into, the array itself.
 *
 * Memory safety: the tensor keeps a reference to its array, so the array lives at least as long as the
 * OrtValue can be passed to Run. Before taking the address the array's `buffer` is touched, which moves
 * a small V8 typed array (kept inside the JS heap, where the GC may move it) to a fixed off-heap
 * backing store. A zero-length array gets a small dummy address (onnxruntime may reject null). Release
 * a tensor explicitly when done with it; one that is dropped is released when the GC collects it.
 *
 * @module
 */

import { check, ortApi, outPointer, outSlot } from "./api.ts";

/** Element types the engine exchanges with graphs. */
export type TensorType = "float32" | "float16" | "float64" | "int32" | "int64" | "uint8" | "bool";

/** The typed array of each element type (bool: one byte per element). */
export interface TensorArrays {
  float32: Float32Array;
  float16: Float16Array;
  float64: Float64Array;
  int32: Int32Array;
  int64: BigInt64Array;
  uint8: Uint8Array;
  bool: Uint8Array;
}
export type TensorData = TensorArrays[TensorType];

/** A tensor in JS memory: an element type, its typed array and its shape. */
export interface HostTensor<T extends TensorType = TensorType> {
  type: T;
  data: TensorArrays[T];
  dims: readonly number[];
}

/** `ONNXTensorElementDataType` values (onnxruntime_c_api.h). */
const ELEMENT_TYPE: Record<TensorType, number> = {
  float32: 1,
  float16: 10,
  uint8: 2,
  int32: 6,
  int64: 7,
  bool: 9,
  float64: 11,
};

const ARRAY_OF: Record<TensorType, { name: string }> = {
  float32: Float32Array,
  float16: Float16Array,
  float64: Float64Array,
  int32: Int32Array,
  int64: BigInt64Array,
  uint8: Uint8Array,
  bool: Uint8Array,
};

const OrtDeviceAllocator = 0; // OrtAllocatorType
const OrtMemTypeDefault = 0; // OrtMemType

/** The address given for zero-length tensors: valid memory that is never read. */
const EMPTY = new Uint8Array(new ArrayBuffer(16));

let cpuMemoryInfo: Deno.PointerValue = null;

/** This thread's `OrtMemoryInfo` for plain CPU memory (created on first use). */
function cpuMemory(): Deno.PointerValue {
  if (cpuMemoryInfo) return cpuMemoryInfo;
  const out = outSlot();
  check(ortApi().CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, out), "CreateCpuMemoryInfo");
  cpuMemoryInfo = outPointer(out);
  return cpuMemoryInfo;
}

/** Releases this thread's CPU memory info; existing tensors keep their own copy of it. */
export function releaseCpuMemoryInfo(): void {
  if (cpuMemoryInfo) ortApi().ReleaseMemoryInfo(cpuMemoryInfo);
  cpuMemoryInfo = null;
}

const finalizer = new FinalizationRegistry<Deno.PointerObject>((value) => ortApi().ReleaseValue(value));

export class OrtTensor<T extends TensorType = TensorType> {
  readonly type: T;
  /** The JS memory onnxruntime reads and writes. */
  readonly data: TensorArrays[T];
  readonly dims: readonly number[];
  #value: Deno.PointerObject | null;

  constructor(type: T, data: TensorArrays[T], dims: readonly number[]) {
    checkShape(type, data, dims);
    this.type = type;
    this.data = data;
    this.dims = [...dims];
    this.#value = createValue(type, data, dims);
    finalizer.register(this, this.#value, this);
  }

  /** Wraps a host tensor's memory. */
  static of<T extends TensorType>(host: HostTensor<T>): OrtTensor<T> {
    return new OrtTensor(host.type, host.data, host.dims);
  }

  /** The `OrtValue*` to pass to Run. */
  get value(): Deno.PointerObject {
    if (!this.#value) throw new Error(`OrtTensor ${this.type}[${this.dims}]: used after release()`);
    return this.#value;
  }

  get released(): boolean {
    return this.#value === null;
  }

  /** The data address onnxruntime holds for this tensor (GetTensorMutableData), for checks. */
  ortDataAddress(): bigint {
    const out = outSlot();
    check(ortApi().GetTensorMutableData(this.value, out), "GetTensorMutableData");
    return out[0];
  }

  /** The address of `data` as this process sees it (0 for a zero-length array's dummy). */
  jsDataAddress(): bigint {
    return BigInt(Deno.UnsafePointer.value(addressOf(this.data)));
  }

  /** Frees the OrtValue (never the JS array). Safe to call twice. */
  release(): void {
    if (!this.#value) return;
    finalizer.unregister(this);
    ortApi().ReleaseValue(this.#value);
    this.#value = null;
  }
}

function createValue(type: TensorType, data: TensorData, dims: readonly number[]): Deno.PointerObject {
  const out = outSlot();
  const shape = BigInt64Array.from(dims, BigInt);
  const status = ortApi().CreateTensorWithDataAsOrtValue(
    cpuMemory(),
    addressOf(data),
    BigInt(data.byteLength),
    shape,
    BigInt(dims.length),
    ELEMENT_TYPE[type],
    out,
  );
  check(status, `CreateTensorWithDataAsOrtValue (${type}[${dims}])`);
  return outPointer(out)!;
}

/** A fixed address for the array's first element (see the module comment). */
function addressOf(data: TensorData): Deno.PointerObject {
  if (data.byteLength === 0) return Deno.UnsafePointer.of(EMPTY)!;
  void data.buffer; // moves an on-heap typed array to a fixed off-heap store
  return Deno.UnsafePointer.of(data)!;
}

function checkShape(type: TensorType, data: TensorData, dims: readonly number[]): void {
  const expected = ARRAY_OF[type].name;
  const bad = (why: string) => new RangeError(`OrtTensor ${type}[${dims.join(", ")}]: ${why}`);
  if (data.constructor.name !== expected) throw bad(`data is a ${data.constructor.name}; pass a ${expected}`);
  if (!dims.every((d) => Number.isInteger(d) && d >= 0)) throw bad("dims must be non-negative integers");
  const count = dims.reduce((n, d) => n * d, 1);
  if (count !== data.length) throw bad(`${data.length} elements given, the shape holds ${count}`);
}
