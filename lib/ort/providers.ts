/**
 * The onnxruntime execution providers this project can run on, by the names onnxruntime registers them
 * under. The list lives here, at the bottom layer, because everything above needs it: the config's choices
 * (`lib/config`), the graphs that differ per provider (`lib/model/graph/head.ts` avoids LogSoftmax on
 * WebGPU), the sessions (`lib/engine/session.ts`, `session.ts` here) and the trainer.
 *
 * @module
 */

/** Execution providers the engine and the trainer can ask for (CPU is always appended last). */
export const EXECUTION_PROVIDERS = ["cpu", "webgpu", "cuda"] as const;

/** One of `EXECUTION_PROVIDERS`. */
export type ExecutionProvider = typeof EXECUTION_PROVIDERS[number];

/**
 * A provider's options: onnxruntime's key/value provider options, both strings, keys without the
 * `ep.<provider>.` prefix the C API adds (WebGPU's: webgpu_options.ts).
 */
export type ProviderOptions = Readonly<Record<string, string>>;
