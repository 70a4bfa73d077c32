/**
 * `OrtSession`: an onnxruntime inference session driven through the C API (FFI), whose Run takes input
 * tensors and PRE-ALLOCATED output tensors that all wrap JS memory (value.ts), so a run copies nothing.
 *
 * Why not the onnxruntime-node binding: it wraps input buffers without copying too, but after every Run
 * it copies each output into a new ArrayBuffer, pre-allocated ones included, and it has no IOBinding. A
 * KV cache passed as both GroupQueryAttention's past input and its present output is updated in place by
 * the kernel and then copied whole by the binding: per decode step 2 × layers × cache bytes, so the step
 * time grows with the cache capacity rather than with the attention work. Here the outputs are the
 * caller's arrays and nothing is copied after Run.
 *
 * Calls block the calling thread for the whole run (the engine runs in a Worker).
 *
 * Initializers can be given as tensors over the caller's memory (`initializers`, onnxruntime's
 * AddInitializer): the session then computes with that memory instead of loading its own copy, so
 * several sessions can share one copy of a model's weights (lib/model/shared_weights.ts). The graph
 * still declares each such initializer (any external-data reference to an existing file will do; it
 * is never read). Prepacking (on by default) would give each consuming MatMul/Gemm its own packed
 * copy, so sharing sessions usually set `session.disable_prepacking`; a `PrepackedWeights` container
 * makes sessions share those packed copies instead (docs/ENGINE_FACTS.md has the measurements).
 *
 * @module
 */

import { check, cString, ortApi, outPointer, outSlot } from "./api.ts";
import { IoBinding } from "./binding.ts";
import { DeviceMemory } from "./device.ts";
import { ortEnv } from "./env.ts";
import type { ExecutionProvider, ProviderOptions } from "./providers.ts";
import type { RunOptions } from "./run_options.ts";
import type { OrtTensor } from "./value.ts";

/** Graph optimization levels (`GraphOptimizationLevel`). */
export const GRAPH_OPTIMIZATION = { disabled: 0, basic: 1, extended: 2, all: 99 } as const;
export type GraphOptimization = keyof typeof GRAPH_OPTIMIZATION;

export interface OrtSessionOptions {
  /** Intra-op threads; 0 or absent: onnxruntime's default (one per core). */
  intraOpThreads?: number;
  /** Inter-op threads; 0 or absent: onnxruntime's default. */
  interOpThreads?: number;
  /** Default "all". */
  graphOptimization?: GraphOptimization;
  /** Session config entries (onnxruntime_session_options_config_keys.h), e.g.
   * `session.model_external_initializers_file_folder_path`. */
  config?: Record<string, string>;
  /** In order of preference; default ["cpu"]. */
  providers?: readonly ExecutionProvider[];
  /**
   * Options of the providers in `providers`, by provider: webgpu's only so far, passed as keys and values
   * to `SessionOptionsAppendExecutionProvider` (webgpu_options.ts lists them). A value onnxruntime refuses
   * fails the session with onnxruntime's message.
   */
  providerOptions?: Readonly<Partial<Record<ExecutionProvider, ProviderOptions>>>;
  /** Write a profile (JSON) with this file prefix; it is closed by `endProfiling()` or `release()`. */
  profileFilePrefix?: string;
  /**
   * Initializers read from the caller's memory instead of the model (AddInitializer), by graph name.
   * The session keeps the tensors reachable until it is released; their memory must not change
   * while a run is in flight.
   */
  initializers?: Readonly<Record<string, OrtTensor>>;
  /**
   * onnxruntime's CPU arena (default on): it keeps every block it ever allocated for reuse. Off, freed
   * activations go back to the system allocator (and large blocks to the OS).
   */
  cpuArena?: boolean;
  /** Memory patterns (default on): after a run, plan one block per input shape for the next runs. */
  memPattern?: boolean;
  /** Share prepacked weights with every other session created with the same container. */
  prepackedWeights?: PrepackedWeights;
  /** The least severe onnxruntime log message this session prints (default: the env's, warnings). */
  logSeverity?: LogSeverity;
}

/** onnxruntime's `OrtLoggingLevel`s, least severe first. */
export const LOG_SEVERITIES = ["verbose", "info", "warning", "error", "fatal"] as const;
export type LogSeverity = typeof LOG_SEVERITIES[number];

/** A name as a C string, kept alive with its address for the `const char*` arrays Run takes. */
interface CName {
  bytes: Uint8Array;
  address: bigint;
}

/**
 * An `OrtPrepackedWeightsContainer`: sessions created with the same container share the packed copies
 * that their MatMul/Gemm kernels make of initializers given through `initializers` (only those).
 */
export class PrepackedWeights {
  #container: Deno.PointerValue;

  constructor() {
    const out = outSlot();
    check(ortApi().CreatePrepackedWeightsContainer(out), "CreatePrepackedWeightsContainer");
    this.#container = outPointer(out);
  }

  /** The container pointer (for session creation). */
  get pointer(): Deno.PointerObject {
    if (!this.#container) throw new Error("PrepackedWeights: used after release()");
    return this.#container;
  }

  /** Frees the container; only after every session created with it has been released. */
  release(): void {
    if (this.#container) ortApi().ReleasePrepackedWeightsContainer(this.#container);
    this.#container = null;
  }
}

export class OrtSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  #session: Deno.PointerValue;
  #profiling: boolean;
  readonly #names = new Map<string, CName>();
  /** What the session reads from outside itself: kept reachable until release(). */
  readonly #borrowed: unknown[];
  /** The options its providers were appended with (its device memory hands them on). */
  readonly #providerOptions: NonNullable<OrtSessionOptions["providerOptions"]>;

  private constructor(session: Deno.PointerObject, profiling: boolean, options: OrtSessionOptions) {
    this.#session = session;
    this.#profiling = profiling;
    this.#borrowed = [options.initializers, options.prepackedWeights];
    this.#providerOptions = options.providerOptions ?? {};
    this.inputNames = sessionNames(session, "input");
    this.outputNames = sessionNames(session, "output");
  }

  /** Builds a session from serialized model bytes (CreateSessionFromArray[WithPrepackedWeightsContainer]). */
  static create(model: Uint8Array, options: OrtSessionOptions = {}): OrtSession {
    const api = ortApi();
    const env = ortEnv(); // before the options: providers log through the env's default logger
    const opts = createOptions(options);
    try {
      const out = outSlot();
      const n = BigInt(model.byteLength);
      if (options.prepackedWeights) {
        const container = options.prepackedWeights.pointer;
        check(
          api.CreateSessionFromArrayWithPrepackedWeightsContainer(env, model, n, opts, container, out),
          "CreateSessionFromArrayWithPrepackedWeightsContainer",
        );
      } else {
        check(api.CreateSessionFromArray(env, model, n, opts, out), "CreateSessionFromArray");
      }
      return new OrtSession(outPointer(out)!, options.profileFilePrefix !== undefined, options);
    } finally {
      api.ReleaseSessionOptions(opts);
    }
  }

  /**
   * Runs the graph. Every requested output is given as a tensor of its exact shape, which onnxruntime
   * writes in place; a tensor may be both an input and an output (a KV cache updated in place).
   */
  run(inputs: Record<string, OrtTensor>, outputs: Record<string, OrtTensor>): void {
    const session = this.#live();
    const inNames = Object.keys(inputs);
    const outNames = Object.keys(outputs);
    const inputValues = pointerArray(inNames.map((n) => inputs[n].value));
    const outputValues = pointerArray(outNames.map((n) => outputs[n].value));
    const given = outputValues.slice();
    const status = ortApi().Run(
      session,
      null,
      this.#nameArray(inNames),
      inputValues,
      BigInt(inNames.length),
      this.#nameArray(outNames),
      BigInt(outNames.length),
      outputValues,
    );
    check(status, `Run (${inNames.length} inputs, ${outNames.length} pre-allocated outputs)`);
    outNames.forEach((name, i) => {
      if (outputValues[i] !== given[i]) {
        ortApi().ReleaseValue(Deno.UnsafePointer.create(outputValues[i]));
        throw new Error(
          `onnxruntime Run replaced the pre-allocated output ${name} (it should write into it)`,
        );
      }
    });
  }

  /** A new IO binding for this session (binding.ts); release it before the session. */
  createBinding(): IoBinding {
    return new IoBinding(this.#live());
  }

  /** Runs with the values bound to `binding` (and `options`, e.g. a captured graph's id: run_options.ts). */
  runBinding(binding: IoBinding, options?: RunOptions): void {
    check(ortApi().RunWithBinding(this.#live(), options?.pointer ?? null, binding.pointer), "RunWithBinding");
  }

  /**
   * This session's allocator for `provider`'s device memory (device.ts), carrying the provider's options
   * for the sessions that work on its tensors; release it before the session.
   */
  deviceMemory(provider: Exclude<ExecutionProvider, "cpu">): DeviceMemory {
    return new DeviceMemory(this.#live(), provider, this.#providerOptions[provider] ?? {});
  }

  /** Ends profiling and returns the profile's file name (null when profiling is off). */
  endProfiling(): string | null {
    if (!this.#profiling) return null;
    this.#profiling = false;
    const api = ortApi();
    const allocator = defaultAllocator();
    const out = outSlot();
    check(api.SessionEndProfiling(this.#live(), allocator, out), "SessionEndProfiling");
    return takeString(allocator, outPointer(out));
  }

  /** Frees the session (ending profiling first). Safe to call twice. */
  release(): void {
    if (!this.#session) return;
    this.endProfiling();
    ortApi().ReleaseSession(this.#session);
    this.#session = null;
    this.#borrowed.length = 0;
  }

  #live(): Deno.PointerObject {
    if (!this.#session) throw new Error("OrtSession: used after release()");
    return this.#session;
  }

  #nameArray(names: readonly string[]): BigUint64Array {
    return BigUint64Array.from(names, (name) => {
      let c = this.#names.get(name);
      if (!c) {
        const bytes = cString(name);
        c = { bytes, address: BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(bytes))) };
        this.#names.set(name, c);
      }
      return c.address;
    });
  }
}

function createOptions(options: OrtSessionOptions): Deno.PointerObject {
  const api = ortApi();
  const out = outSlot();
  check(api.CreateSessionOptions(out), "CreateSessionOptions");
  const opts = outPointer(out)!;
  try {
    const level = GRAPH_OPTIMIZATION[options.graphOptimization ?? "all"];
    check(api.SetSessionGraphOptimizationLevel(opts, level), "SetSessionGraphOptimizationLevel");
    if (options.intraOpThreads) {
      check(api.SetIntraOpNumThreads(opts, options.intraOpThreads), "SetIntraOpNumThreads");
    }
    if (options.interOpThreads) {
      check(api.SetInterOpNumThreads(opts, options.interOpThreads), "SetInterOpNumThreads");
    }
    for (const [key, value] of Object.entries(options.config ?? {})) {
      check(api.AddSessionConfigEntry(opts, cString(key), cString(value)), `AddSessionConfigEntry ${key}`);
    }
    if (options.logSeverity !== undefined) {
      const level = LOG_SEVERITIES.indexOf(options.logSeverity);
      check(api.SetSessionLogSeverityLevel(opts, level), "SetSessionLogSeverityLevel");
    }
    if (options.cpuArena === false) check(api.DisableCpuMemArena(opts), "DisableCpuMemArena");
    if (options.memPattern === false) check(api.DisableMemPattern(opts), "DisableMemPattern");
    for (const [name, tensor] of Object.entries(options.initializers ?? {})) {
      check(api.AddInitializer(opts, cString(name), tensor.value), `AddInitializer ${name}`);
    }
    if (options.profileFilePrefix !== undefined) {
      check(api.EnableProfiling(opts, cString(options.profileFilePrefix)), "EnableProfiling");
    }
    const providers: readonly string[] = options.providers ?? ["cpu"];
    const stray = Object.keys(options.providerOptions ?? {}).filter((p) => !providers.includes(p));
    if (stray.length > 0) {
      throw new Error(
        `OrtSession: provider options for ${stray}, not among the providers (${providers}); pass them with it`,
      );
    }
    for (const p of options.providers ?? ["cpu"]) appendProvider(opts, p, options.providerOptions?.[p] ?? {});
    return opts;
  } catch (e) {
    api.ReleaseSessionOptions(opts);
    throw e;
  }
}

/** Appends `provider` with its `options` (only WebGPU takes options here; CPU is always there, last). */
function appendProvider(
  opts: Deno.PointerObject,
  provider: ExecutionProvider,
  options: ProviderOptions,
): void {
  const api = ortApi();
  const entries = Object.entries(options);
  if (provider !== "webgpu" && entries.length > 0) {
    throw new Error(
      `OrtSession: provider options for ${provider} (${Object.keys(options)}): only webgpu takes any`,
    );
  }
  if (provider === "cpu") return; // always there, after the others
  if (provider === "webgpu") {
    const keys = entries.map(([key]) => cString(key));
    const values = entries.map(([, value]) => cString(value));
    const status = api.SessionOptionsAppendExecutionProvider(
      opts,
      cString("WebGPU"),
      addressArray(keys),
      addressArray(values),
      BigInt(entries.length),
    );
    check(status, "SessionOptionsAppendExecutionProvider WebGPU"); // a refused value: ORT's message names it
    return;
  }
  const out = outSlot();
  check(api.CreateCUDAProviderOptions(out), "CreateCUDAProviderOptions");
  const cuda = outPointer(out);
  try {
    check(
      api.SessionOptionsAppendExecutionProvider_CUDA_V2(opts, cuda),
      "SessionOptionsAppendExecutionProvider_CUDA_V2",
    );
  } finally {
    api.ReleaseCUDAProviderOptions(cuda);
  }
}

/** The session's input or output names, in graph order. */
function sessionNames(session: Deno.PointerObject, kind: "input" | "output"): string[] {
  const api = ortApi();
  const count = outSlot();
  const getCount = kind === "input" ? api.SessionGetInputCount : api.SessionGetOutputCount;
  const getName = kind === "input" ? api.SessionGetInputName : api.SessionGetOutputName;
  check(getCount(session, count), `Session${kind}Count`);
  const allocator = defaultAllocator();
  return Array.from({ length: Number(count[0]) }, (_, i) => {
    const out = outSlot();
    check(getName(session, BigInt(i), allocator, out), `SessionGet${kind}Name ${i}`);
    return takeString(allocator, outPointer(out))!;
  });
}

/** onnxruntime's default CPU allocator (not to be freed). */
function defaultAllocator(): Deno.PointerValue {
  const out = outSlot();
  check(ortApi().GetAllocatorWithDefaultOptions(out), "GetAllocatorWithDefaultOptions");
  return outPointer(out);
}

/** Reads a string onnxruntime allocated with `allocator`, then frees it. */
function takeString(allocator: Deno.PointerValue, pointer: Deno.PointerValue): string | null {
  if (!pointer) return null;
  const text = Deno.UnsafePointerView.getCString(pointer);
  check(ortApi().AllocatorFree(allocator, pointer), "AllocatorFree");
  return text;
}

/** `const char* const*`: the addresses of C strings (`cString`), which must outlive the call. */
function addressArray(strings: readonly Uint8Array<ArrayBuffer>[]): BigUint64Array {
  return BigUint64Array.from(strings, (s) => BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(s))));
}

/** `OrtValue* const*`: the addresses of `values`, in order. */
function pointerArray(values: readonly Deno.PointerObject[]): BigUint64Array {
  return BigUint64Array.from(values, (v) => BigInt(Deno.UnsafePointer.value(v)));
}
