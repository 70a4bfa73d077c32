/**
 * WebGPU provider options through the C API (lib/ort/session.ts, lib/ort/webgpu_options.ts): every value
 * of every key this project sets is accepted and the session computes; a value onnxruntime does not know
 * fails the session with onnxruntime's own message; options reach the device memory's helper sessions;
 * the Node binding (the engine's fallback) takes the same keys; options for a provider that is not
 * appended, or for one that takes none here, are refused before onnxruntime sees them.
 *
 * The WebGPU tests run where the provider starts (CI: lavapipe) and are skipped elsewhere (helpers/webgpu.ts).
 */

import assert from "node:assert/strict";
import { GraphBuilder } from "../../lib/onnx/builder.ts";
import { OrtError } from "../../lib/ort/api.ts";
import { OrtSession } from "../../lib/ort/session.ts";
import { OrtTensor } from "../../lib/ort/value.ts";
import { createSession } from "../../lib/engine/session.ts";
import {
  ORT_WEBGPU_DEFAULTS,
  WEBGPU_BUFFER_CACHE_MODES,
  WEBGPU_VALIDATION_MODES,
  type WebGpuOptions,
} from "../../lib/ort/webgpu_options.ts";
import { webgpuTest } from "../helpers/webgpu.ts";

/** y = x + x over four floats. */
function addModel(): Uint8Array {
  const g = new GraphBuilder("add");
  const x = g.input("x", "float32", [4]);
  g.output(g.op("Add", [x, x]), "y", [4]); // [4]
  return g.toModel();
}

/** Opens a WebGPU session with `options`, runs it once, and returns y. */
function runWith(options: Record<string, string>): number[] {
  const session = OrtSession.create(addModel(), {
    providers: ["webgpu"],
    providerOptions: { webgpu: options },
  });
  try {
    const y = new Float32Array(4);
    session.run(
      { x: new OrtTensor("float32", Float32Array.of(1, 2, 3, 4), [4]) },
      { y: new OrtTensor("float32", y, [4]) },
    );
    return Array.from(y);
  } finally {
    session.release();
  }
}

webgpuTest("every buffer cache mode and validation mode is accepted, and the session computes", () => {
  // Session i sets value i of each set on every key: four sessions cover every value of every key.
  for (let i = 0; i < WEBGPU_BUFFER_CACHE_MODES.length; i++) {
    const mode = WEBGPU_BUFFER_CACHE_MODES[i];
    const options: WebGpuOptions = {
      storageBufferCacheMode: mode,
      uniformBufferCacheMode: mode,
      queryResolveBufferCacheMode: mode,
      defaultBufferCacheMode: mode,
      validationMode: WEBGPU_VALIDATION_MODES[i],
    };
    assert.deepEqual(runWith({ ...options }), [2, 4, 6, 8], JSON.stringify(options));
  }
  assert.deepEqual(runWith({ ...ORT_WEBGPU_DEFAULTS }), [2, 4, 6, 8], "onnxruntime's defaults, given");
  return Promise.resolve();
});

webgpuTest(
  "a value onnxruntime does not know fails the session with its message; an unknown key is ignored",
  () => {
    const refused = (options: Record<string, string>, reason: RegExp) =>
      assert.throws(
        () => runWith(options),
        (e: unknown) =>
          e instanceof OrtError && e.code === "FAIL" &&
          /SessionOptionsAppendExecutionProvider WebGPU/.test(e.message) &&
          reason.test(e.ortMessage),
      );
    refused({ storageBufferCacheMode: "fast" }, /Invalid buffer cache mode: fast/);
    refused({ defaultBufferCacheMode: "LazyRelease" }, /Invalid buffer cache mode: LazyRelease/); // case matters
    refused({ validationMode: "none" }, /Invalid validation mode: none/);
    assert.throws(
      () => runWith({ validationMode: "" }),
      (e: unknown) =>
        e instanceof OrtError && e.code === "INVALID_ARGUMENT" && /cannot be empty/.test(e.message),
    );
    assert.deepEqual(runWith({ noSuchOption: "1" }), [2, 4, 6, 8]);
    return Promise.resolve();
  },
);

webgpuTest(
  "a session's device memory carries its provider options, for the sessions that work on its tensors",
  () => {
    const options = { storageBufferCacheMode: "simple", validationMode: "disabled" };
    const session = OrtSession.create(addModel(), {
      providers: ["webgpu"],
      providerOptions: { webgpu: options },
    });
    const memory = session.deviceMemory("webgpu");
    try {
      assert.deepEqual(memory.providerOptions, options);
    } finally {
      memory.release();
      session.release();
    }
    return Promise.resolve();
  },
);

webgpuTest(
  "the Node binding, the engine's fallback, takes the same options beside the provider's name",
  async () => {
    const dir = await Deno.makeTempDir();
    try {
      const ok = await createSession(addModel(), dir, {
        ep: "webgpu",
        providerOptions: { validationMode: "full" },
      });
      await ok.release();
      await assert.rejects(
        () =>
          createSession(addModel(), dir, {
            ep: "webgpu",
            providerOptions: { storageBufferCacheMode: "fast" },
          }),
        /Invalid buffer cache mode: fast/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
);

Deno.test("provider options for a provider not appended, or for one that takes none here, are refused", () => {
  assert.throws(
    () => OrtSession.create(addModel(), { providerOptions: { webgpu: { validationMode: "disabled" } } }),
    /provider options for webgpu, not among the providers \(cpu\)/,
  );
  assert.throws(
    () => OrtSession.create(addModel(), { providerOptions: { cpu: { anything: "1" } } }),
    /provider options for cpu \(anything\): only webgpu takes any/,
  );
  OrtSession.create(addModel(), { providerOptions: { cpu: {} } }).release(); // none given: fine
});
