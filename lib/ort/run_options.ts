/**
 * `RunOptions`: onnxruntime's options for one run (`OrtRunOptions`), as config entries. The one this
 * project sets is `gpu_graph_id` (`kOrtRunOptionsConfigCudaGraphAnnotation`), which picks the captured
 * graph a run of a session with graph capture replays, or with -1 runs it uncaptured
 * (lib/engine/decode_session.ts; docs/ENGINE_FACTS.md, "Graph capture of the decode step").
 *
 * @module
 */

import { check, cString, ortApi, outPointer, outSlot } from "./api.ts";

/** The run option that names a run's captured graph (-1: do not capture or replay this run). */
export const GRAPH_ID_KEY = "gpu_graph_id";

export class RunOptions {
  #options: Deno.PointerValue;

  /** Run options with `entries` as config entries (key → value, as onnxruntime spells them). */
  constructor(entries: Readonly<Record<string, string>> = {}) {
    const out = outSlot();
    check(ortApi().CreateRunOptions(out), "CreateRunOptions");
    this.#options = outPointer(out);
    try {
      for (const [key, value] of Object.entries(entries)) {
        check(
          ortApi().AddRunConfigEntry(this.pointer, cString(key), cString(value)),
          `AddRunConfigEntry ${key}`,
        );
      }
    } catch (e) {
      this.release();
      throw e;
    }
  }

  /** The `OrtRunOptions*`. */
  get pointer(): Deno.PointerObject {
    if (!this.#options) throw new Error("RunOptions: used after release()");
    return this.#options;
  }

  /** Frees the options. Safe to call twice. */
  release(): void {
    if (this.#options) ortApi().ReleaseRunOptions(this.#options);
    this.#options = null;
  }
}
