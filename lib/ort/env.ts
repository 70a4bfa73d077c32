/**
 * The process's `OrtEnv`: created on first use and kept (onnxruntime keeps one per process and counts
 * references to it). Sessions are created in it, and `CopyTensors` copies through the data transfers its
 * providers registered.
 *
 * @module
 */

import { check, cString, ortApi, outPointer, outSlot } from "./api.ts";

const ORT_LOGGING_LEVEL_WARNING = 2;

let env: Deno.PointerValue = null;

/** The process's `OrtEnv` (onnxruntime keeps one per process and counts references to it). */
export function ortEnv(): Deno.PointerValue {
  if (env) return env;
  const out = outSlot();
  check(ortApi().CreateEnv(ORT_LOGGING_LEVEL_WARNING, cString("deno-rl"), out), "CreateEnv");
  env = outPointer(out);
  return env;
}
