/**
 * `IoBinding`: onnxruntime's IO binding for one session. Values are bound by name once and stay bound
 * across runs; a run (`OrtSession.runBinding`) reads and writes the bound values, wherever they live.
 *
 * What binding does with each kind of value (measured; docs/ENGINE_FACTS.md, "The GPU path"):
 * - a device tensor (device.ts) is used in place, as input or as output: a KV cache bound as both the
 *   past input and the present output of GroupQueryAttention is updated in place on the device;
 * - a host tensor bound as an input that a device node reads is copied to the device when it is BOUND,
 *   not at each run: an adapter bound once stays on the device for every later run, and a host array
 *   changed after binding is not seen until it is bound again;
 * - a host tensor bound as an output receives the value after the run (copied from the device).
 *
 * @module
 */

import { check, cString, ortApi, outPointer, outSlot } from "./api.ts";
import type { OrtValueHandle } from "./device.ts";

export class IoBinding {
  #binding: Deno.PointerValue;
  /** Values bound, kept reachable while bound (onnxruntime holds their OrtValues, not the JS memory). */
  readonly #held = new Map<string, OrtValueHandle>();

  /** A binding for `session` (an `OrtSession*`). */
  constructor(session: Deno.PointerObject) {
    const out = outSlot();
    check(ortApi().CreateIoBinding(session, out), "CreateIoBinding");
    this.#binding = outPointer(out);
  }

  /** The `OrtIoBinding*` (for the session's run). */
  get pointer(): Deno.PointerObject {
    if (!this.#binding) throw new Error("IoBinding: used after release()");
    return this.#binding;
  }

  /** Binds an input by name (a host tensor is copied to where its first consumer runs, now). */
  input(name: string, value: OrtValueHandle): void {
    check(ortApi().BindInput(this.pointer, cString(name), value.value), `BindInput ${name}`);
    this.#held.set(`in:${name}`, value);
  }

  /** Binds an output by name to a pre-allocated tensor, written by each run. */
  output(name: string, value: OrtValueHandle): void {
    check(ortApi().BindOutput(this.pointer, cString(name), value.value), `BindOutput ${name}`);
    this.#held.set(`out:${name}`, value);
  }

  /** Waits until the device has written every bound output (a host output is then readable). */
  synchronizeOutputs(): void {
    check(ortApi().SynchronizeBoundOutputs(this.pointer), "SynchronizeBoundOutputs");
  }

  /** Unbinds every input and output. */
  clear(): void {
    ortApi().ClearBoundInputs(this.pointer);
    ortApi().ClearBoundOutputs(this.pointer);
    this.#held.clear();
  }

  /** Frees the binding (the values stay). Safe to call twice. */
  release(): void {
    if (this.#binding) ortApi().ReleaseIoBinding(this.#binding);
    this.#binding = null;
    this.#held.clear();
  }
}
