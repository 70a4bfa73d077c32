/**
 * The engine's session on a GPU provider (WebGPU, CUDA): an FFI session run through IO binding
 * (lib/ort/binding.ts), so that what stays on the device between runs is bound there and never copied:
 *
 * - the weights are the session's initializers, uploaded once when it is created;
 * - a tensor given to `bind` (an adapter's LoRA tensors) is uploaded once into device memory and bound
 *   from there by every run that feeds it;
 * - device tensors (the KV cache, device_cache.ts) are bound as they are, as inputs and as outputs;
 * - the small per-run inputs (token ids, lengths, sampling parameters) are copied to the device when
 *   bound, and host outputs (sampled ids, log-probs, a loss, gradients) are written into the caller's
 *   arrays after the run.
 *
 * @module
 */

import { type DeviceMemory, DeviceTensor, type OrtValueHandle } from "../ort/device.ts";
import type { IoBinding } from "../ort/binding.ts";
import type { OrtSession } from "../ort/session.ts";
import { type HostTensor, OrtTensor } from "../ort/value.ts";
import type { BoundTensor, EngineSession, Feed } from "./engine_session.ts";
import { GRAPH_ID_KEY, RunOptions } from "../ort/run_options.ts";

/** A run bound once (`DeviceEngineSession.fixedRun`). */
export interface FixedRun {
  /** Runs the session on the bound values and waits for its outputs. */
  run(): void;
}

/** A tensor bound for many runs: in device memory, or (types the device does not hold) the host's. */
class DeviceBound implements BoundTensor {
  readonly tensor: DeviceTensor | HostTensor;
  readonly #owned: boolean;

  constructor(tensor: DeviceTensor | HostTensor, owned: boolean) {
    this.tensor = tensor;
    this.#owned = owned;
  }

  release(): void {
    if (this.#owned && this.tensor instanceof DeviceTensor) this.tensor.release();
  }
}

/** Element types a host tensor may have on the device. */
const DEVICE_TYPES = new Set(["float32", "float16", "int32", "int64"]);

export class DeviceEngineSession implements EngineSession {
  readonly backend = "device";
  readonly device: DeviceMemory;
  readonly #session: OrtSession;
  readonly #binding: IoBinding;
  /** Bindings and run options of `fixedRun`s, released with the session. */
  readonly #fixed: { binding: IoBinding; options: RunOptions }[] = [];

  constructor(session: OrtSession, device: DeviceMemory) {
    this.#session = session;
    this.device = device;
    this.#binding = session.createBinding();
  }

  /** Uploads a host tensor once (a device tensor is bound as it is). */
  bind(tensor: HostTensor | DeviceTensor): BoundTensor {
    if (tensor instanceof DeviceTensor) return new DeviceBound(tensor, false);
    if (!DEVICE_TYPES.has(tensor.type)) return new DeviceBound(tensor, false); // copied at each run
    return new DeviceBound(this.#upload(tensor), true);
  }

  run(inputs: Record<string, Feed>, outputs: Record<string, Feed>): Promise<void> {
    const temporary: OrtTensor[] = [];
    const handle = (feed: Feed): OrtValueHandle => {
      const t = feed instanceof DeviceBound ? feed.tensor : feed;
      if (t instanceof DeviceTensor) return t;
      const host = OrtTensor.of(t as HostTensor);
      temporary.push(host);
      return host;
    };
    const binding = this.#binding;
    try {
      binding.clear();
      for (const [name, feed] of Object.entries(inputs)) binding.input(name, handle(feed));
      for (const [name, feed] of Object.entries(outputs)) binding.output(name, handle(feed));
      this.#session.runBinding(binding);
      binding.synchronizeOutputs();
    } finally {
      binding.clear();
      temporary.forEach((t) => t.release());
    }
    return Promise.resolve();
  }

  /**
   * A run whose values are bound once and stay bound (graph capture, decode_session.ts): each `run()`
   * runs the session on them with run option `gpu_graph_id` = `graphId`, which on a session opened with
   * `enableGraphCapture` captures the run's dispatches the first time and replays them after. The caller
   * changes inputs by writing into the bound tensors, never by binding others.
   */
  fixedRun(
    inputs: Record<string, OrtValueHandle>,
    outputs: Record<string, DeviceTensor>,
    graphId: number,
  ): FixedRun {
    const binding = this.#session.createBinding();
    const options = new RunOptions({ [GRAPH_ID_KEY]: String(graphId) });
    try {
      for (const [name, value] of Object.entries(inputs)) binding.input(name, value);
      for (const [name, value] of Object.entries(outputs)) binding.output(name, value);
    } catch (e) {
      binding.release();
      options.release();
      throw e;
    }
    this.#fixed.push({ binding, options });
    return {
      run: () => {
        this.#session.runBinding(binding, options);
        binding.synchronizeOutputs();
      },
    };
  }

  close(): Promise<void> {
    this.#fixed.forEach((f) => (f.binding.release(), f.options.release()));
    this.#binding.release();
    this.device.release(); // device tensors still live (a cache not released), before the session's allocator
    this.#session.release();
    return Promise.resolve();
  }

  #upload(host: HostTensor): DeviceTensor {
    const tensor = this.device.tensor(host.type as "float32" | "float16" | "int32" | "int64", host.dims);
    const source = OrtTensor.of(host);
    try {
      this.device.upload([[source, tensor]]);
    } finally {
      source.release();
    }
    return tensor;
  }
}
