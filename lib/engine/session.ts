/**
 * onnxruntime sessions for the graphs the engine builds: execution provider, threads, and the folder
 * external weights are read from.
 *
 * Two kinds: `createSession` opens an onnxruntime-node session (the trainer's); `openEngineSession`
 * opens the inference engine's, which runs with every output pre-allocated in JS memory. It uses the
 * C API through FFI (lib/ort), where inputs and outputs are both zero-copy; the Node binding copies
 * every output after a run, which for a KV cache bound as GroupQueryAttention's past and present means
 * the whole cache per decode step. Where the FFI library cannot be loaded (not linux-x64) the engine
 * session falls back to the binding, with one warning line on stderr.
 *
 * Shared weights: given `SessionOptions.sharedWeights` (lib/model/shared_weights.ts) and a graph built
 * over them, an FFI session reads the weights from that shared memory (onnxruntime's AddInitializer)
 * instead of folding its own float32 copy, and prepacking is off so that no GEMM keeps a packed copy
 * either: every session of the process computes on the one copy. Such sessions also run without
 * onnxruntime's CPU arena and memory patterns, so that one session's activations are returned after
 * its run rather than kept beside the other's. The binding cannot do this; where FFI is unavailable
 * `sessionWeights` returns undefined and the graphs fold their own copies as before.
 *
 * Environment knobs, for experiments and diagnosis (both kinds):
 *   DENO_RL_ORT_OPT      graph optimization level: disabled | basic | extended | all (default)
 *   DENO_RL_ORT_CONFIG   extra session config entries, "key=value,key=value"
 *   DENO_RL_ORT_PROFILE  a file prefix: onnxruntime writes per-node timings (JSON) when the session closes
 *   DENO_RL_ORT_FFI=0    engine sessions use the binding (to compare the two)
 *   DENO_RL_ORT_LOG      onnxruntime's log level for engine sessions: verbose | info | warning | error | fatal
 *                        (default: warning on CPU, error on a GPU provider, whose warning that some nodes
 *                        run on the CPU is expected: graph/forms.ts lists them; verbose shows every node's
 *                        provider)
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import { UserError } from "../errors.ts";
import { ortApi } from "../ort/api.ts";
import type { ExecutionProvider, ProviderOptions } from "../ort/providers.ts";
import type { ComputeDtype } from "../model/graph/forms.ts";
import {
  GRAPH_OPTIMIZATION,
  type GraphOptimization,
  LOG_SEVERITIES,
  type LogSeverity,
  OrtSession,
} from "../ort/session.ts";
import { providerFailure } from "../ort/provider_check.ts";
import { type HostTensor, OrtTensor } from "../ort/value.ts";
import { DeviceTensor } from "../ort/device.ts";
import { DeviceEngineSession } from "./device_session.ts";
import type { BoundTensor, EngineSession, Feed } from "./engine_session.ts";

export type { BoundTensor, EngineSession, Feed } from "./engine_session.ts";
import { type SharedTensor, sharedTensorData, type SharedWeights } from "../model/shared_weights.ts";

/** How to run a graph. */
export interface SessionOptions {
  ep?: ExecutionProvider;
  /**
   * `ep`'s options: onnxruntime's key/value provider options (webgpu only; lib/ort/webgpu_options.ts
   * lists WebGPU's). Every session of a process should get the same: they share the device's context.
   */
  providerOptions?: ProviderOptions;
  /** Weights and activations: float32 (default), or float16 on a GPU provider (graph/forms.ts). */
  compute?: ComputeDtype;
  /** Intra-op threads; 0 or absent lets onnxruntime choose (one per core). */
  threads?: number;
  /**
   * Run the engine's plain decode steps on the decode graph, which has no If, in a session of its own
   * (webgpu only; lib/engine/decode_session.ts, from `model.webgpu.decode_graph`). Default true on webgpu.
   */
  decodeGraph?: boolean;
  /**
   * Run those steps under graph capture (webgpu only; lib/engine/decode_session.ts, from
   * `model.webgpu.graph_capture`). Default false.
   */
  graphCapture?: boolean;
  /**
   * The model's float32 weights, loaded once per process (`loadSharedWeights`): graphs are built over
   * them and sessions read them in place (FFI only; ignored, with a warning, where FFI is unavailable).
   */
  sharedWeights?: SharedWeights | null;
  /**
   * onnxruntime graph transformers and rewrite rules to leave out, by name (its session config entry
   * `optimization.disable_specified_optimizers`): for two sessions over related graphs that must compute
   * alike (the trainer's forward alone and its whole graph: lib/train/trainer.ts).
   */
  disabledOptimizers?: readonly string[];
}

/** Options resolved from `SessionOptions` and the environment knobs. */
interface ResolvedOptions {
  ep: ExecutionProvider;
  /** `ep`'s options; empty where none are given. */
  providerOptions: ProviderOptions;
  logSeverity: LogSeverity | undefined;
  threads: number;
  optimization: GraphOptimization;
  config: Record<string, string>;
  /** onnxruntime's `optimization.*` config entries: the transformers left out, where any are. */
  optimizationConfig: Record<string, string>;
  profile: string | undefined;
}

function resolveOptions(
  externalFolder: string,
  options: SessionOptions,
  defaults: Record<string, string> = {},
): ResolvedOptions {
  const optimization = Deno.env.get("DENO_RL_ORT_OPT") ?? "all";
  if (!(optimization in GRAPH_OPTIMIZATION)) {
    throw new UserError("DENO_RL_ORT_OPT", {
      value: optimization,
      why: "it is not a graph optimization level",
      fix: `use one of ${Object.keys(GRAPH_OPTIMIZATION).join(", ")}`,
    });
  }
  const config: Record<string, string> = {
    ...defaults,
    model_external_initializers_file_folder_path: externalFolder,
  };
  const extra = Deno.env.get("DENO_RL_ORT_CONFIG"); // experiments: "key=value,key=value" session config entries
  for (const kv of extra ? extra.split(",") : []) {
    const [k, v] = kv.split("=");
    config[k] = v;
  }
  const ep = options.ep ?? "cpu";
  const log = Deno.env.get("DENO_RL_ORT_LOG");
  if (log !== undefined && !(LOG_SEVERITIES as readonly string[]).includes(log)) {
    throw new UserError("DENO_RL_ORT_LOG", {
      value: log,
      why: "it is not an onnxruntime log level",
      fix: `use one of ${LOG_SEVERITIES.join(", ")}`,
    });
  }
  return {
    ep,
    providerOptions: options.providerOptions ?? {},
    logSeverity: (log as LogSeverity | undefined) ?? (ep === "cpu" ? undefined : "error"),
    threads: options.threads && options.threads > 0 ? options.threads : 0,
    optimization: optimization as GraphOptimization,
    config,
    optimizationConfig: options.disabledOptimizers?.length
      ? { disable_specified_optimizers: options.disabledOptimizers.join(";") }
      : {},
    profile: Deno.env.get("DENO_RL_ORT_PROFILE") || undefined, // a file prefix: per-node timings for diagnosis
  };
}

/** Creates an onnxruntime-node session for model bytes whose external weights live below `externalFolder`. */
export async function createSession(
  bytes: Uint8Array,
  externalFolder: string,
  options: SessionOptions = {},
): Promise<ort.InferenceSession> {
  const o = resolveOptions(externalFolder, options);
  // The binding takes a provider's options beside its name (WebGPU's by the same keys as the C API).
  const provider = Object.keys(o.providerOptions).length > 0 ? { name: o.ep, ...o.providerOptions } : o.ep;
  const sessionOptions: ort.InferenceSession.SessionOptions = {
    executionProviders: [provider],
    graphOptimizationLevel: o.optimization,
    interOpNumThreads: 1,
    extra: { session: { ...o.config }, optimization: { ...o.optimizationConfig } },
  };
  if (o.threads) sessionOptions.intraOpNumThreads = o.threads;
  if (o.profile) Object.assign(sessionOptions, { enableProfiling: true, profileFilePrefix: o.profile });
  try {
    return await ort.InferenceSession.create(bytes, sessionOptions);
  } catch (e) {
    throw providerError(o.ep, e);
  }
}

/** Opens the engine's session: through FFI where the library loads, else through the binding. */
export async function openEngineSession(
  bytes: Uint8Array,
  externalFolder: string,
  options: SessionOptions = {},
  shared: readonly SharedTensor[] = [],
): Promise<EngineSession> {
  if (shared.length > 0 || ffiUsable()) {
    if (shared.length > 0 && !sessionWeights(options)) {
      throw new Error("engine session: a graph over shared weights needs them, on CPU (see sessionWeights)");
    }
    const initializers = shared.length > 0 ? sharedInitializers(options.sharedWeights, shared) : undefined;
    // A prepacked GEMM weight is a packed copy per session: off where the weights are shared.
    const defaults: Record<string, string> = initializers ? { disable_prepacking: "1" } : {};
    const o = resolveOptions(externalFolder, options, defaults);
    try {
      const session = OrtSession.create(bytes, {
        providers: [o.ep],
        providerOptions: { [o.ep]: o.providerOptions },
        intraOpThreads: o.threads,
        interOpThreads: 1,
        graphOptimization: o.optimization,
        config: { ...prefixed("session", o.config), ...prefixed("optimization", o.optimizationConfig) },
        profileFilePrefix: o.profile,
        logSeverity: o.logSeverity,
        initializers,
        // Where the weights are shared, so is the process's memory: activations go back to the system
        // after each run instead of staying in this session's arena (docs/ENGINE_FACTS.md).
        cpuArena: !initializers,
        memPattern: !initializers,
      });
      if (o.ep === "cpu") return new FfiEngineSession(session);
      try {
        return new DeviceEngineSession(session, session.deviceMemory(o.ep));
      } catch (e) {
        session.release();
        throw e;
      }
    } catch (e) {
      throw providerError(o.ep, e);
    }
  }
  return new BindingEngineSession(await createSession(bytes, externalFolder, options));
}

/**
 * The shared weights to build graphs over: `options.sharedWeights` for CPU sessions where this thread can
 * run FFI sessions; undefined otherwise (the graphs then fold their own copies, as the binding needs).
 * onnxruntime uses a given initializer only where the session plans that value in CPU memory; elsewhere it
 * loads the graph's own data, here a placeholder (docs/ENGINE_FACTS.md): shared weights are for CPU only.
 */
export function sessionWeights(options: SessionOptions): SharedWeights | undefined {
  if (!options.sharedWeights || (options.ep ?? "cpu") !== "cpu") return undefined;
  return ffiUsable() ? options.sharedWeights : undefined;
}

/** This thread's tensors over each shared buffer, made once and kept while the buffer lives. */
const sharedTensors = new WeakMap<SharedArrayBuffer, Map<string, OrtTensor>>();

/** The initializers a graph built over shared weights declared, as tensors over the shared memory. */
function sharedInitializers(
  weights: SharedWeights | null | undefined,
  declared: readonly SharedTensor[],
): Record<string, OrtTensor> {
  if (!weights) throw new Error("engine session: the graph was built over shared weights; pass them");
  let tensors = sharedTensors.get(weights.buffer);
  if (!tensors) sharedTensors.set(weights.buffer, tensors = new Map());
  const out: Record<string, OrtTensor> = {};
  for (const t of declared) {
    const mine = weights.tensors.find((w) => w.name === t.name);
    if (!mine || mine.offset !== t.offset || mine.dims.join() !== t.dims.join()) {
      throw new Error(`engine session: shared tensor ${t.name} is not in these shared weights`);
    }
    let tensor = tensors.get(t.name);
    if (!tensor) tensors.set(t.name, tensor = new OrtTensor("float32", sharedTensorData(weights, t), t.dims));
    out[t.name] = tensor;
  }
  return out;
}

/** The binding prefixes its `extra.<area>` keys with "<area>."; the C API takes the full key. */
function prefixed(area: string, config: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(config).map(([k, v]) => [`${area}.${k}`, v]));
}

let ffiState: "usable" | "unusable" | undefined;

/** Whether the FFI library loads on this thread (warns once, on stderr, when it does not). */
function ffiUsable(): boolean {
  if (Deno.env.get("DENO_RL_ORT_FFI") === "0") return false;
  if (ffiState === undefined) {
    try {
      ortApi();
      ffiState = "usable";
    } catch (e) {
      ffiState = "unusable";
      console.warn(
        `onnxruntime FFI unavailable, using onnxruntime-node (outputs copied): ${(e as Error).message}`,
      );
    }
  }
  return ffiState === "usable";
}

function providerError(ep: ExecutionProvider, e: unknown): unknown {
  if (ep === "cpu" || e instanceof UserError) return e;
  return providerFailure(ep, (e as Error).message);
}

class FfiBound implements BoundTensor {
  readonly tensor: OrtTensor;

  constructor(host: HostTensor) {
    this.tensor = OrtTensor.of(host);
  }

  release(): void {
    this.tensor.release();
  }
}

class FfiEngineSession implements EngineSession {
  readonly backend = "ffi";
  readonly device = null;
  readonly #session: OrtSession;

  constructor(session: OrtSession) {
    this.#session = session;
  }

  bind(tensor: HostTensor | DeviceTensor): BoundTensor {
    return new FfiBound(hostOnly(tensor));
  }

  run(inputs: Record<string, Feed>, outputs: Record<string, Feed>): Promise<void> {
    const temporary = new Map<HostTensor, OrtTensor>(); // one OrtValue per host tensor, for this run only
    const wrap = (feeds: Record<string, Feed>) =>
      mapValues(feeds, (f) => {
        if (f instanceof FfiBound) return f.tensor;
        const host = f as HostTensor;
        let t = temporary.get(host);
        if (!t) temporary.set(host, t = OrtTensor.of(host));
        return t;
      });
    try {
      this.#session.run(wrap(inputs), wrap(outputs));
    } finally {
      temporary.forEach((t) => t.release());
    }
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.#session.release();
    return Promise.resolve();
  }
}

class BindingBound implements BoundTensor {
  readonly tensor: ort.Tensor;

  constructor(host: HostTensor) {
    this.tensor = bindingTensor(host, true);
  }

  release(): void {}
}

class BindingEngineSession implements EngineSession {
  readonly backend = "binding";
  readonly device = null;
  readonly #session: ort.InferenceSession;

  constructor(session: ort.InferenceSession) {
    this.#session = session;
  }

  bind(tensor: HostTensor | DeviceTensor): BoundTensor {
    return new BindingBound(hostOnly(tensor));
  }

  async run(inputs: Record<string, Feed>, outputs: Record<string, Feed>): Promise<void> {
    const wrap = (feeds: Record<string, Feed>, input: boolean) =>
      mapValues(feeds, (f) => (f instanceof BindingBound ? f.tensor : bindingTensor(f as HostTensor, input)));
    // Pre-allocated fetches are written in place; the copies the binding returns are dropped.
    await this.#session.run(wrap(inputs, true), wrap(outputs, false) as ort.InferenceSession.FetchesType);
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}

/** A host session's tensor: device tensors belong to device sessions only. */
function hostOnly(tensor: HostTensor | DeviceTensor): HostTensor {
  if (tensor instanceof DeviceTensor) {
    throw new Error("engine session: a device tensor given to a host session");
  }
  return tensor;
}

/**
 * An onnxruntime-node tensor over the host tensor's memory (no copy). The binding refuses memory of a
 * SharedArrayBuffer ("Invalid argument"), which an input may be (the Linear stacks a merged adapter is
 * computed from are read from shared weights): such an input is given as a copy; an output, which is
 * written in place, is refused in one line.
 */
function bindingTensor(host: HostTensor, input: boolean): ort.Tensor {
  const shared = host.data.buffer instanceof SharedArrayBuffer;
  if (shared && !input) {
    throw new Error("engine session: onnxruntime-node cannot write an output into a SharedArrayBuffer");
  }
  const data = shared ? host.data.slice() : host.data;
  return new ort.Tensor(host.type, data as Float32Array, host.dims);
}

function mapValues<A, B>(record: Record<string, A>, f: (a: A) => B): Record<string, B> {
  const out: Record<string, B> = {};
  for (const key in record) out[key] = f(record[key]);
  return out;
}
