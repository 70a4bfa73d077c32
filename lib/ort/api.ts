/**
 * The part of onnxruntime's C API (`struct OrtApi`) this toolkit calls, bound through Deno FFI.
 *
 * `OrtApi` is a struct of function pointers whose member order is append-only across versions, so a
 * member's index is fixed forever. The indices below were counted from the member list of
 * `struct OrtApi` in microsoft/onnxruntime include/onnxruntime/core/session/onnxruntime_c_api.h
 * (a one-off script listed the members in order; its count was cross-checked, member by member, against
 * the `OrtApi` field list of the project's C# binding, NativeMethods.shared.cs). The signatures are the
 * header's, with `OrtStatus*` (null = success) as the result of every `ORT_API2_STATUS` function.
 * tests/ort/ffi_test.ts calls every one of them.
 *
 * @module
 */

import { openOrtLibrary } from "./library.ts";

/** Index of each member used, in `struct OrtApi` (8-byte function pointers on x86-64). */
export const ORT_API_INDEX = {
  GetErrorCode: 1,
  GetErrorMessage: 2,
  CreateEnv: 3,
  CreateSessionFromArray: 8,
  Run: 9,
  CreateSessionOptions: 10,
  EnableProfiling: 14,
  DisableMemPattern: 17,
  DisableCpuMemArena: 19,
  SetSessionLogSeverityLevel: 22,
  SetSessionGraphOptimizationLevel: 23,
  SetIntraOpNumThreads: 24,
  SetInterOpNumThreads: 25,
  SessionGetInputCount: 30,
  SessionGetOutputCount: 31,
  SessionGetInputName: 36,
  SessionGetOutputName: 37,
  CreateRunOptions: 39,
  CreateTensorAsOrtValue: 48,
  CreateTensorWithDataAsOrtValue: 49,
  GetTensorMutableData: 51,
  CreateMemoryInfo: 68,
  CreateCpuMemoryInfo: 69,
  MemoryInfoGetName: 71,
  AllocatorFree: 76,
  GetAllocatorWithDefaultOptions: 78,
  ReleaseStatus: 93,
  ReleaseMemoryInfo: 94,
  ReleaseSession: 95,
  ReleaseValue: 96,
  ReleaseRunOptions: 97,
  ReleaseSessionOptions: 100,
  SessionEndProfiling: 110,
  GetAvailableProviders: 125,
  ReleaseAvailableProviders: 126,
  AddSessionConfigEntry: 130,
  CreateAllocator: 131,
  ReleaseAllocator: 132,
  RunWithBinding: 133,
  CreateIoBinding: 134,
  ReleaseIoBinding: 135,
  BindInput: 136,
  BindOutput: 137,
  ClearBoundInputs: 141,
  ClearBoundOutputs: 142,
  AddInitializer: 150,
  AddRunConfigEntry: 165,
  CreatePrepackedWeightsContainer: 166,
  ReleasePrepackedWeightsContainer: 167,
  CreateSessionFromArrayWithPrepackedWeightsContainer: 169,
  GetTensorMemoryInfo: 194,
  SynchronizeBoundOutputs: 203,
  SessionOptionsAppendExecutionProvider_CUDA_V2: 204,
  CreateCUDAProviderOptions: 205,
  ReleaseCUDAProviderOptions: 208,
  SessionOptionsAppendExecutionProvider: 216,
  GetBuildInfoString: 254,
  CopyTensors: 386,
} as const;

const STATUS = "pointer"; // OrtStatus*: null on success
const P = "pointer"; // an ORT object or a pointer into JS memory
const B = "buffer"; // a JS typed array: an out-parameter, a C string or an array of pointers

/** FFI signatures, one per member of ORT_API_INDEX. */
const SIGNATURES = {
  GetErrorCode: { parameters: [P], result: "i32" },
  GetErrorMessage: { parameters: [P], result: P },
  CreateEnv: { parameters: ["i32", B, B], result: STATUS }, // level, logid, OrtEnv** out
  CreateSessionFromArray: { parameters: [P, B, "usize", P, B], result: STATUS }, // env, bytes, n, options, out
  // session, run options, input names, inputs, n, output names, m, outputs (pre-allocated OrtValue*s)
  Run: { parameters: [P, P, B, B, "usize", B, "usize", B], result: STATUS },
  CreateSessionOptions: { parameters: [B], result: STATUS },
  EnableProfiling: { parameters: [P, B], result: STATUS }, // options, file prefix
  DisableMemPattern: { parameters: [P], result: STATUS },
  DisableCpuMemArena: { parameters: [P], result: STATUS },
  SetSessionLogSeverityLevel: { parameters: [P, "i32"], result: STATUS }, // options, OrtLoggingLevel
  SetSessionGraphOptimizationLevel: { parameters: [P, "i32"], result: STATUS },
  SetIntraOpNumThreads: { parameters: [P, "i32"], result: STATUS },
  SetInterOpNumThreads: { parameters: [P, "i32"], result: STATUS },
  SessionGetInputCount: { parameters: [P, B], result: STATUS },
  SessionGetOutputCount: { parameters: [P, B], result: STATUS },
  SessionGetInputName: { parameters: [P, "usize", P, B], result: STATUS }, // session, i, allocator, char** out
  SessionGetOutputName: { parameters: [P, "usize", P, B], result: STATUS },
  CreateRunOptions: { parameters: [B], result: STATUS }, // OrtRunOptions** out
  // allocator, shape (int64[]), rank, element type, OrtValue** out: a tensor in the allocator's memory
  CreateTensorAsOrtValue: { parameters: [P, B, "usize", "i32", B], result: STATUS },
  // memory info, data, bytes, shape (int64[]), rank, element type, OrtValue** out
  CreateTensorWithDataAsOrtValue: { parameters: [P, P, "usize", B, "usize", "i32", B], result: STATUS },
  GetTensorMutableData: { parameters: [P, B], result: STATUS }, // value, void** out
  CreateMemoryInfo: { parameters: [B, "i32", "i32", "i32", B], result: STATUS }, // name, allocator type, device id, mem type, out
  CreateCpuMemoryInfo: { parameters: ["i32", "i32", B], result: STATUS }, // allocator type, mem type, out
  MemoryInfoGetName: { parameters: [P, B], result: STATUS }, // memory info, const char** out
  AllocatorFree: { parameters: [P, P], result: STATUS },
  GetAllocatorWithDefaultOptions: { parameters: [B], result: STATUS },
  ReleaseStatus: { parameters: [P], result: "void" },
  ReleaseMemoryInfo: { parameters: [P], result: "void" },
  ReleaseSession: { parameters: [P], result: "void" },
  ReleaseValue: { parameters: [P], result: "void" },
  ReleaseRunOptions: { parameters: [P], result: "void" },
  ReleaseSessionOptions: { parameters: [P], result: "void" },
  SessionEndProfiling: { parameters: [P, P, B], result: STATUS }, // session, allocator, char** out
  GetAvailableProviders: { parameters: [B, B], result: STATUS }, // char*** out, int* count
  ReleaseAvailableProviders: { parameters: [P, "i32"], result: STATUS },
  AddSessionConfigEntry: { parameters: [P, B, B], result: STATUS }, // options, key, value
  CreateAllocator: { parameters: [P, P, B], result: STATUS }, // session, memory info, OrtAllocator** out
  ReleaseAllocator: { parameters: [P], result: "void" },
  RunWithBinding: { parameters: [P, P, P], result: STATUS }, // session, run options, binding
  CreateIoBinding: { parameters: [P, B], result: STATUS }, // session, OrtIoBinding** out
  ReleaseIoBinding: { parameters: [P], result: "void" },
  BindInput: { parameters: [P, B, P], result: STATUS }, // binding, name, OrtValue*
  BindOutput: { parameters: [P, B, P], result: STATUS }, // binding, name, OrtValue* (pre-allocated)
  ClearBoundInputs: { parameters: [P], result: "void" },
  ClearBoundOutputs: { parameters: [P], result: "void" },
  AddInitializer: { parameters: [P, B, P], result: STATUS }, // options, name, OrtValue* (caller's memory)
  AddRunConfigEntry: { parameters: [P, B, B], result: STATUS }, // run options, key, value
  CreatePrepackedWeightsContainer: { parameters: [B], result: STATUS }, // OrtPrepackedWeightsContainer** out
  ReleasePrepackedWeightsContainer: { parameters: [P], result: "void" },
  // env, bytes, n, options, container, out
  CreateSessionFromArrayWithPrepackedWeightsContainer: {
    parameters: [P, B, "usize", P, P, B],
    result: STATUS,
  },
  GetTensorMemoryInfo: { parameters: [P, B], result: STATUS }, // value, const OrtMemoryInfo** out (not owned)
  SynchronizeBoundOutputs: { parameters: [P], result: STATUS }, // binding: waits for the device's writes
  SessionOptionsAppendExecutionProvider_CUDA_V2: { parameters: [P, P], result: STATUS },
  CreateCUDAProviderOptions: { parameters: [B], result: STATUS },
  ReleaseCUDAProviderOptions: { parameters: [P], result: "void" },
  // options, provider name, option keys, option values, n
  SessionOptionsAppendExecutionProvider: { parameters: [P, B, B, B, "usize"], result: STATUS },
  GetBuildInfoString: { parameters: [], result: P }, // const char*, owned by the library
  // env, source OrtValue* [n], destination OrtValue* [n], sync stream (null: synchronous), n
  CopyTensors: { parameters: [P, B, B, P, "usize"], result: STATUS },
} as const satisfies Record<keyof typeof ORT_API_INDEX, Deno.ForeignFunction>;

type Signatures = typeof SIGNATURES;
/** The bound functions, typed from their signatures. */
export type OrtApi = { [K in keyof Signatures]: Deno.UnsafeFnPointer<Signatures[K]>["call"] };

let bound: OrtApi | undefined;

/** The bound API of this thread's library handle (library.ts opens it on first use). */
export function ortApi(): OrtApi {
  if (bound) return bound;
  const view = new Deno.UnsafePointerView(openOrtLibrary().api);
  const table: Record<string, unknown> = {};
  for (const [name, index] of Object.entries(ORT_API_INDEX)) {
    const pointer = view.getPointer(8 * index);
    if (!pointer) throw new Error(`onnxruntime: OrtApi member ${name} (index ${index}) is null`);
    const fn = new Deno.UnsafeFnPointer(
      pointer as Deno.PointerObject<never>,
      SIGNATURES[name as keyof Signatures],
    );
    table[name] = fn.call.bind(fn);
  }
  bound = table as OrtApi;
  return bound;
}

/** onnxruntime's `OrtErrorCode` names, by value. */
const ERROR_CODES = [
  "OK",
  "FAIL",
  "INVALID_ARGUMENT",
  "NO_SUCHFILE",
  "NO_MODEL",
  "ENGINE_ERROR",
  "RUNTIME_EXCEPTION",
  "INVALID_PROTOBUF",
  "MODEL_LOADED",
  "NOT_IMPLEMENTED",
  "INVALID_GRAPH",
  "EP_FAIL",
];

/** An error status from onnxruntime: its message, the call that failed, and ORT's error code. */
export class OrtError extends Error {
  /** `OrtErrorCode` name, e.g. "INVALID_ARGUMENT". */
  readonly code: string;
  /** onnxruntime's own message. */
  readonly ortMessage: string;

  constructor(call: string, code: string, ortMessage: string) {
    super(`onnxruntime ${call} failed (${code}): ${ortMessage}`);
    this.name = "OrtError";
    this.code = code;
    this.ortMessage = ortMessage;
  }
}

/** Throws the status's message (releasing it) when `status` is not null. */
export function check(status: Deno.PointerValue, call: string): void {
  if (status === null) return;
  const api = ortApi();
  const code = ERROR_CODES[api.GetErrorCode(status)] ?? `code ${api.GetErrorCode(status)}`;
  const message = Deno.UnsafePointerView.getCString(api.GetErrorMessage(status)!);
  api.ReleaseStatus(status);
  throw new OrtError(call, code, message);
}

/** A one-slot out-parameter (`T** out`, `size_t* out`). */
export function outSlot(): BigUint64Array {
  return new BigUint64Array(1);
}

/** The pointer an out-parameter received. */
export function outPointer(slot: BigUint64Array): Deno.PointerValue {
  return Deno.UnsafePointer.create(slot[0]);
}

const encoder = new TextEncoder();

/** A NUL-terminated UTF-8 copy of `text`, to pass as `const char*`. */
export function cString(text: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${text}\0`);
}
