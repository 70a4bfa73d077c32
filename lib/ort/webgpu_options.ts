/**
 * The WebGPU provider's options this project sets, by onnxruntime's own names and values: the facts the
 * config's `model.webgpu` section is declared from (lib/config/sections/model.ts) and that
 * `SessionOptionsAppendExecutionProvider("WebGPU", keys, values)` passes (session.ts).
 *
 * Source: onnxruntime's `core/providers/webgpu/webgpu_provider_options.h` (the keys and values) and
 * `webgpu_provider_factory.cc` (`ParseWebGpuContextConfig`, which reads them), checked against the
 * strings in onnxruntime-node 1.30.0's `libonnxruntime.so.1`. The C API prefixes each key with
 * `ep.webgpuexecutionprovider.` and stores it among the session's config entries, where the provider's
 * factory reads it when the provider is appended. A value outside a key's set fails the append with
 * `ORT_FAIL` and onnxruntime's message, e.g. "Invalid buffer cache mode: fast" or "Invalid validation
 * mode: none"; an unknown key is ignored (tests/ort/webgpu_options_test.ts).
 *
 * Other keys onnxruntime 1.30's WebGPU provider reads, not set from the config: `preferredLayout`
 * (NCHW | NHWC), `enableGraphCapture` (0 | 1), `sessionBufferPoolGenerations`, `enableInt64`,
 * `multiRotaryCacheConcatOffset`, `kvCacheQuantizationBits`, `forceCpuNodeNames`, `enablePIXCapture`,
 * `dawnProcTable`, `dawnBackendType` (D3D12 | Vulkan), `powerPreference` (high-performance | low-power),
 * `deviceId`, `webgpuInstance`, `webgpuDevice`, `enableRobustness`, `preserveDevice`,
 * `maxStorageBufferBindingSize`, `maxNumPendingDispatches`. The session options take any key/value map,
 * so adding one is a config key beside its onnxruntime name (`WEBGPU_OPTION_NAMES`,
 * lib/config/sections/model.ts). Three are set per session, by the code that opens it: `enableGraphCapture`
 * on the decode step's own session only (lib/engine/decode_session.ts, `model.webgpu.graph_capture`), since
 * it refuses a graph with an If, which the engine's other graphs have; `enableInt64` on that session too;
 * and `preferredLayout` NCHW on the trainer's (lib/train/trainer.ts `WEBGPU_TRANSPOSE_AS_BUILT`). Each
 * belongs to its session's provider, not to the device's context (below).
 *
 * **One device, one context.** The buffer cache modes and the validation mode belong to the WebGPU
 * context of a device (`deviceId`, default 0), which the first session on the device creates and the
 * last one to close frees: a session opened while another holds the device gets the first one's, and
 * onnxruntime ignores its own silently. Every session of a process should therefore be given the same
 * options, which is what passing them from one config does.
 *
 * @module
 */

/** How the provider keeps freed GPU buffers for reuse (`BufferCacheMode`). */
export const WEBGPU_BUFFER_CACHE_MODES = ["disabled", "lazyRelease", "simple", "bucket"] as const;
export type WebGpuBufferCacheMode = typeof WEBGPU_BUFFER_CACHE_MODES[number];

/** How much onnxruntime and Dawn check each dispatch (`ValidationMode`), least first. */
export const WEBGPU_VALIDATION_MODES = ["disabled", "wgpuOnly", "basic", "full"] as const;
export type WebGpuValidationMode = typeof WEBGPU_VALIDATION_MODES[number];

/** The WebGPU options this project sets, by onnxruntime's key. */
export interface WebGpuOptions {
  /** Storage buffers: every tensor's memory (`storageBufferCacheMode`). */
  storageBufferCacheMode: WebGpuBufferCacheMode;
  /** Uniform buffers: each dispatch's shapes and scalars (`uniformBufferCacheMode`). */
  uniformBufferCacheMode: WebGpuBufferCacheMode;
  /** Query-resolve buffers: profiling timestamps (`queryResolveBufferCacheMode`). */
  queryResolveBufferCacheMode: WebGpuBufferCacheMode;
  /** Any other buffer, e.g. staging for copies to the host (`defaultBufferCacheMode`). */
  defaultBufferCacheMode: WebGpuBufferCacheMode;
  /** `validationMode`. */
  validationMode: WebGpuValidationMode;
}

/**
 * What onnxruntime uses where an option is not given (a release build, as onnxruntime-node ships:
 * `WebGpuBufferCacheConfig` and `WebGpuContextConfig` in webgpu_context.h; a debug build validates
 * `full`). Logged by the provider at verbose level ("WebGPU EP storage buffer cache mode: ...").
 */
export const ORT_WEBGPU_DEFAULTS: Readonly<WebGpuOptions> = {
  storageBufferCacheMode: "bucket",
  uniformBufferCacheMode: "simple",
  queryResolveBufferCacheMode: "disabled",
  defaultBufferCacheMode: "disabled",
  validationMode: "basic",
};
