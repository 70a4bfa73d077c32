/**
 * Tensors in an execution provider's own memory (a WebGPU buffer, CUDA device memory), for values that
 * stay on the device between runs: the KV cache, and whatever a binding (binding.ts) keeps bound.
 *
 * A `DeviceMemory` is a session's allocator for its provider's memory (`CreateAllocator` with the
 * provider's memory info): tensors made with it live on the device until released, and a session of the
 * same provider reads and writes them in place when they are bound as inputs and outputs. JS never sees
 * their contents; `upload` and `download` copy between one and a host tensor (`CopyTensors`, the whole
 * tensor).
 *
 * A view (`prefix`) is a tensor over the first rows of another's memory: the same device buffer with a
 * smaller outermost dimension. Views that start at a later row cannot exist on WebGPU, whose tensors are
 * buffer handles rather than addresses (an offset would make a different, invalid handle), so a caller
 * that needs rows further in copies them (lib/engine/device_cache.ts).
 *
 * @module
 */

import { check, cString, ortApi, outPointer, outSlot } from "./api.ts";
import type { ExecutionProvider, ProviderOptions } from "./providers.ts";
import { ortEnv } from "./env.ts";
import type { OrtTensor } from "./value.ts";

/** Element types of device tensors: the host types plus float16, which JS never reads. */
export type DeviceElementType = "float32" | "float16" | "int32" | "int64";

/** `ONNXTensorElementDataType` values. */
const ELEMENT_TYPE: Record<DeviceElementType, number> = { float32: 1, int32: 6, int64: 7, float16: 10 };
const ELEMENT_BYTES: Record<DeviceElementType, number> = { float32: 4, int32: 4, int64: 8, float16: 2 };

/** The memory-info name under which each device provider registers its allocator (onnxruntime's allocator.h). */
export const DEVICE_MEMORY_NAME: Record<Exclude<ExecutionProvider, "cpu">, string> = {
  webgpu: "WebGPU_Buffer",
  cuda: "Cuda",
};

const OrtDeviceAllocator = 0; // OrtAllocatorType
const OrtMemTypeDefault = 0; // OrtMemType

/** Anything that is an `OrtValue*` (a host tensor, a device tensor). */
export interface OrtValueHandle {
  readonly value: Deno.PointerObject;
}

/** Views own no memory: one the garbage collector drops frees only its handle. */
const views = new FinalizationRegistry<Deno.PointerObject>((value) => ortApi().ReleaseValue(value));

/**
 * A tensor in device memory (see the module comment). A tensor that owns its memory is released
 * explicitly, or by its `DeviceMemory` when that is released: freeing it returns the memory to the
 * session's allocator, which must still exist (so never from a garbage-collector callback that could run
 * after the session closed). A view is released when dropped.
 */
export class DeviceTensor implements OrtValueHandle {
  readonly type: DeviceElementType;
  readonly dims: readonly number[];
  /** The tensor whose memory this view shares (kept reachable while the view lives). */
  readonly #parent: DeviceTensor | null;
  /** The allocator's record of its live tensors (owners only). */
  readonly #owners: Set<DeviceTensor> | null;
  #value: Deno.PointerObject | null;

  constructor(
    type: DeviceElementType,
    dims: readonly number[],
    value: Deno.PointerObject,
    owner: { parent: DeviceTensor } | { owners: Set<DeviceTensor> },
  ) {
    this.type = type;
    this.dims = [...dims];
    this.#value = value;
    this.#parent = "parent" in owner ? owner.parent : null;
    this.#owners = "owners" in owner ? owner.owners : null;
    if (this.#owners) this.#owners.add(this);
    else views.register(this, value, this);
  }

  get value(): Deno.PointerObject {
    if (!this.#value) throw new Error(`DeviceTensor ${this.type}[${this.dims}]: used after release()`);
    if (this.#parent?.released) {
      throw new Error(`DeviceTensor view ${this.type}[${this.dims}]: its tensor was released`);
    }
    return this.#value;
  }

  get released(): boolean {
    return this.#value === null;
  }

  /** Bytes the tensor covers. */
  get bytes(): number {
    return ELEMENT_BYTES[this.type] * this.dims.reduce((a, b) => a * b, 1);
  }

  /** Frees the OrtValue (a tensor's memory goes back to its allocator; a view frees only itself). */
  release(): void {
    if (!this.#value) return;
    if (this.#owners) this.#owners.delete(this);
    else views.unregister(this);
    ortApi().ReleaseValue(this.#value);
    this.#value = null;
  }
}

/** A session's allocator for its device provider's memory. */
export class DeviceMemory {
  readonly provider: Exclude<ExecutionProvider, "cpu">;
  /**
   * The options the session's provider was appended with: a session that works on these tensors opens
   * with the same (lib/engine/device_cache.ts), since they share the device's context (webgpu_options.ts).
   */
  readonly providerOptions: ProviderOptions;
  #info: Deno.PointerValue;
  #allocator: Deno.PointerValue;
  /** Every tensor made here and not yet released. */
  readonly #owned = new Set<DeviceTensor>();

  /** The allocator of `session` (an `OrtSession*`) for `provider`'s default device memory. */
  constructor(
    session: Deno.PointerObject,
    provider: Exclude<ExecutionProvider, "cpu">,
    providerOptions: ProviderOptions = {},
  ) {
    const api = ortApi();
    this.provider = provider;
    this.providerOptions = providerOptions;
    const info = outSlot();
    const name = DEVICE_MEMORY_NAME[provider];
    check(
      api.CreateMemoryInfo(cString(name), OrtDeviceAllocator, 0, OrtMemTypeDefault, info),
      `CreateMemoryInfo ${name}`,
    );
    this.#info = outPointer(info);
    const allocator = outSlot();
    try {
      check(api.CreateAllocator(session, this.#info, allocator), `CreateAllocator ${name}`);
    } catch (e) {
      api.ReleaseMemoryInfo(this.#info);
      throw e;
    }
    this.#allocator = outPointer(allocator);
  }

  /** A new tensor in device memory (contents undefined until written). */
  tensor(type: DeviceElementType, dims: readonly number[]): DeviceTensor {
    const out = outSlot();
    const shape = BigInt64Array.from(dims, BigInt);
    const status = ortApi().CreateTensorAsOrtValue(
      this.#live(),
      shape,
      BigInt(dims.length),
      ELEMENT_TYPE[type],
      out,
    );
    check(status, `CreateTensorAsOrtValue (${this.provider} ${type}[${dims}])`);
    return new DeviceTensor(type, dims, outPointer(out)!, { owners: this.#owned });
  }

  /** The first `rows` entries of `tensor`'s outermost dimension, in the same memory. */
  prefix(tensor: DeviceTensor, rows: number): DeviceTensor {
    const [outer, ...inner] = tensor.dims;
    if (!(Number.isInteger(rows) && rows >= 1 && rows <= outer)) {
      throw new RangeError(`device tensor [${tensor.dims}]: no prefix of ${rows} rows`);
    }
    if (rows === outer) return tensor;
    const api = ortApi();
    const data = outSlot();
    check(api.GetTensorMutableData(tensor.value, data), "GetTensorMutableData");
    const info = outSlot();
    check(api.GetTensorMemoryInfo(tensor.value, info), "GetTensorMemoryInfo");
    const dims = [rows, ...inner];
    const out = outSlot();
    const status = api.CreateTensorWithDataAsOrtValue(
      outPointer(info),
      outPointer(data),
      BigInt(ELEMENT_BYTES[tensor.type] * dims.reduce((a, b) => a * b, 1)),
      BigInt64Array.from(dims, BigInt),
      BigInt(dims.length),
      ELEMENT_TYPE[tensor.type],
      out,
    );
    check(status, `CreateTensorWithDataAsOrtValue (a view of ${rows} rows)`);
    return new DeviceTensor(tensor.type, dims, outPointer(out)!, { parent: tensor });
  }

  /** Copies host tensors into device tensors of the same type and shape (waits until done). */
  upload(pairs: readonly [OrtTensor, DeviceTensor][]): void {
    copyTensors(pairs.map(([h]) => h.value), pairs.map(([, d]) => d.value));
  }

  /** Copies device tensors into host tensors of the same type and shape (waits until done). */
  download(pairs: readonly [DeviceTensor, OrtTensor][]): void {
    copyTensors(pairs.map(([d]) => d.value), pairs.map(([, h]) => h.value));
  }

  /** Frees every tensor made here that is still live, then the allocator. Safe to call twice. */
  release(): void {
    for (const t of [...this.#owned]) t.release();
    if (this.#allocator) ortApi().ReleaseAllocator(this.#allocator);
    if (this.#info) ortApi().ReleaseMemoryInfo(this.#info);
    this.#allocator = null;
    this.#info = null;
  }

  #live(): Deno.PointerObject {
    if (!this.#allocator) throw new Error(`DeviceMemory ${this.provider}: used after release()`);
    return this.#allocator;
  }
}

function copyTensors(from: readonly Deno.PointerObject[], to: readonly Deno.PointerObject[]): void {
  if (from.length === 0) return;
  const addresses = (values: readonly Deno.PointerObject[]) =>
    BigUint64Array.from(values, (v) => BigInt(Deno.UnsafePointer.value(v)));
  const status = ortApi().CopyTensors(ortEnv(), addresses(from), addresses(to), null, BigInt(from.length));
  check(status, `CopyTensors (${from.length} tensors)`);
}
