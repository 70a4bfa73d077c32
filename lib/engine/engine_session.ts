/**
 * What the engine and the trainer run on: an `EngineSession` over one graph, whatever its backend
 * (session.ts opens one: FFI in host memory, the onnxruntime-node binding, or FFI with IO binding on a GPU
 * provider, device_session.ts), and the tensors it is fed.
 *
 * @module
 */

import type { DeviceMemory, DeviceTensor } from "../ort/device.ts";
import type { HostTensor } from "../ort/value.ts";

/** A tensor held by an engine session for many runs (a KV cache layer, an adapter tensor). */
export interface BoundTensor {
  /** Frees the session's handle, and a device copy the session made (never the JS memory). */
  release(): void;
}

/** A run's tensor: a host tensor (wrapped for that run only), a bound one, or one in device memory. */
export type Feed = HostTensor | BoundTensor | DeviceTensor;

/**
 * The engine's session: every output of a run is written into the array given for it (JS memory, or
 * device memory on a GPU provider, device_session.ts).
 */
export interface EngineSession {
  /** ffi: C API, host memory; binding: onnxruntime-node; device: C API with IO binding on a GPU provider. */
  readonly backend: "ffi" | "binding" | "device";
  /** The provider's device memory, for caches that stay on the device (null: host memory). */
  readonly device: DeviceMemory | null;
  /** Binds a tensor for many runs (a device tensor only on a device session). */
  bind(tensor: HostTensor | DeviceTensor): BoundTensor;
  /** Runs with `inputs`; each requested output is given with its exact shape and written in place. */
  run(inputs: Record<string, Feed>, outputs: Record<string, Feed>): Promise<void>;
  close(): Promise<void>;
}
