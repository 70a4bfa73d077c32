/**
 * `DecodeSession`: the policy's plain one-token decode steps in a session of their own, over the decode
 * graph (infer_graph.ts, heads `decode`), which has no If: on WebGPU by default (`model.webgpu.decode_graph`),
 * and under onnxruntime's graph capture with `model.webgpu.graph_capture`. A decode step is hundreds of
 * kernels (588 for 28 layers: kernel_count_test.ts) whose dispatch, not arithmetic, is the step's time on a
 * GPU (issue 29). The main graph's step runs six If nodes besides (its score head, constraints, filtered
 * sampling and alternatives, each chosen at run time), and each If is the host running a subgraph of its
 * own, fed by host inputs copied in at every run; the decode graph computes the unfiltered sampler and the
 * argmax both and keeps one by a `Where` on the device (head.ts `sampleUnbranched`). A captured graph is
 * the step's dispatches recorded once and replayed by the provider without walking the graph again.
 *
 * Every input and output of a step is in device memory, written in place before it (the small ones per
 * batch size); uncaptured, a step binds them for its run only, as the main session binds its own, so that
 * no binding keeps a released cache's memory alive (onnxruntime's binding holds the tensors it is given).
 *
 * What capture needs (onnxruntime 1.30's WebGPU provider; docs/ENGINE_FACTS.md, "Graph capture of the
 * decode step"), and how this file meets it:
 * - **No control flow in the graph**: the session refuses capture for a graph with an If; the decode
 *   graph has none. It takes the main graph's weight inputs (with an adapter shape, the merged Linear
 *   stacks: merged_weights.ts) and folds the rest of the checkpoint itself (the embedding, the norms).
 * - **The same buffers at every replay**: a replay reads and writes the buffers bound when it was
 *   captured, and host inputs are not copied again. So every input and output lives in device memory,
 *   bound once per cache binding (one batch's rows of one KV cache; the binding, and so the cache's
 *   memory, is kept until the session closes; the engine lends a released cache to the next batch of its
 *   size and capacity, cache_pool.ts) and written in place before each step: token ids, cache
 *   positions (`seqlens_k`), temperatures, uniforms; the weight inputs in fixed device tensors rewritten
 *   by `setWeights`, which the engine's main session binds too (one copy on the device); the KV cache
 *   bound as GroupQueryAttention's past and present.
 *   `total_seq_len`, which the attention kernel reads on the host and attends over (each sequence masked
 *   past its own length, from `seqlens_k`), is fixed per captured graph: a span of `attentionSpan`'s
 *   series that holds the step's longest sequence. Each output is written by a kernel: a replay repeats
 *   dispatches, not the buffer copies a Reshape into a bound output makes (head.ts).
 * - **No copy between host and device inside the run**: the decode graph computes no shape from a device
 *   tensor and keeps its scalars per sequence (infer_graph.ts, head.ts say how).
 * - **The same shapes**: one captured graph per cache binding and span, by `gpu_graph_id` (run_options.ts);
 *   the session keeps every graph it captured, with its small input tensors, until it closes.
 *
 * What the engine's own session runs (engine.ts): prefills and continuations (more than one new token),
 * steps with constraints, alternatives or top-k / top-p, and caches that are staged copies
 * (device_cache.ts).
 *
 * Dimension legend: B sequences (the binding's rows).
 *
 * @module
 */

import {
  type DeviceElementType,
  type DeviceMemory,
  DeviceTensor,
  type OrtValueHandle,
} from "../ort/device.ts";
import { type HostTensor, OrtTensor } from "../ort/value.ts";
import { DeviceEngineSession, type FixedRun } from "./device_session.ts";
import type { GraphForms } from "../model/graph/forms.ts";
import type { ModelDir } from "../model/model_dir.ts";
import type { LoraShape } from "../model/lora.ts";
import { type CacheBinding, cacheIO } from "./kv_cache.ts";
import { type AdapterForm, buildInferenceModel, IO } from "./infer_graph.ts";
import { openEngineSession, type SessionOptions } from "./session.ts";
import { UserError } from "../errors.ts";
import type { SamplingParams } from "./feeds.ts";

/** What a decode step gives (the fields of engine.ts's `StepInput` this path reads). */
export interface DecodeStepInput {
  /** `[B]` token ids: one new token per sequence. */
  ids: ArrayLike<number>;
  batch: number;
  /** New tokens per sequence: 1 for a step this path runs. */
  width: number;
  /** Per sequence: the position the token is written at (cache length after the step - 1). */
  seqlens: ArrayLike<number>;
  uniforms: ArrayLike<number>;
  sampling: SamplingParams;
  cache: CacheBinding;
  constraints?: readonly ({ ids: readonly number[] } | null)[];
  topN?: number;
}

/** A sampled token and its log-prob per sequence. */
export interface DecodeStepOutput {
  tokens: number[];
  logprobs: number[];
}

/** A batch size's step inputs and outputs: host staging, and the device tensors a step reads and writes. */
interface StepIO {
  /** Host arrays copied into `device` before each step (same order). */
  staged: OrtTensor[];
  device: DeviceTensor[];
  ids: BigInt64Array; // [B]
  seqlens: Int32Array; // [B]
  temperature: Float32Array; // [B]
  uniforms: Float32Array; // [B]
  tokens: [DeviceTensor, OrtTensor<"int64">]; // [B]
  logprobs: [DeviceTensor, OrtTensor<"float32">]; // [B]
}

export class DecodeSession {
  readonly #session: DeviceEngineSession;
  readonly #memory: DeviceMemory;
  /** Whether steps run under graph capture (each binding's first step records, the later ones replay). */
  readonly captures: boolean;
  /** The graph's weight inputs (the engine's: merged Linear stacks, say) by name, in fixed device buffers. */
  readonly #weights = new Map<string, DeviceTensor>();
  /** Whether a step has bound `#weights` (a graph captured with them): no weight may be added after. */
  #weightsBound = false;
  /** Step inputs and outputs by batch size, shared by every cache binding of that size. */
  readonly #io = new Map<number, StepIO>();
  /**
   * Under capture: each cache binding's runs by attention span, each bound once (its graph is captured by
   * its first run).
   */
  readonly #captured = new WeakMap<CacheBinding, Map<number, FixedRun>>();
  #nextGraph = 1;
  /**
   * The step last started: steps share their input and output buffers (`#io`, per batch size), and an
   * uncaptured run awaits between writing them and reading its outputs, so each step waits for the one
   * before it (two callers stepping one engine at once would otherwise read each other's tokens).
   */
  #last: Promise<unknown> = Promise.resolve();
  /** Decode steps run here (a count for tests and stats; under capture each is a capture or a replay). */
  steps = 0;

  /** Graphs captured (each binding's first run at each span). */
  get capturedGraphs(): number {
    return this.#nextGraph - 1;
  }

  private constructor(session: DeviceEngineSession, captures: boolean) {
    this.#session = session;
    this.#memory = session.device;
    this.captures = captures;
  }

  /**
   * Builds the decode graph of `model` (the engine's weight and adapter inputs for `lora` in `form`, its
   * `forms`) and opens its session on `options.ep`, which must be webgpu, with the engine's provider
   * options, plus `enableGraphCapture` where `capture`.
   */
  static async open(
    model: ModelDir,
    lora: LoraShape | null,
    forms: GraphForms,
    options: SessionOptions,
    form: AdapterForm,
    capture: boolean,
  ): Promise<DecodeSession> {
    const what = capture ? "graph capture" : "the decode graph";
    if (options.ep !== "webgpu") {
      const key = capture ? "graph_capture" : "decode_graph";
      throw new Error(
        `${what}: model.ep is ${options.ep ?? "cpu"}; it needs webgpu (set model.webgpu.${key} false)`,
      );
    }
    const built = buildInferenceModel(model, lora, forms, undefined, "decode", form);
    // enableInt64: the int64 kernels a captured session gets anyway (the head's int64 → float32 Casts);
    // without them onnxruntime runs those Casts on the CPU, with a copy to the host and back in each step.
    const providerOptions = {
      ...options.providerOptions,
      enableInt64: "1",
      ...(capture ? { enableGraphCapture: "1" } : {}),
    };
    const session = await openEngineSession(built.bytes, built.externalFolder, {
      ...options,
      sharedWeights: null,
      providerOptions,
    }).catch((e) => {
      throw capture ? captureRefusal(e) : e;
    });
    if (!(session instanceof DeviceEngineSession)) {
      await session.close();
      throw new Error(`${what}: the ${session.backend} session has no device bindings; it needs FFI`);
    }
    return new DecodeSession(session, capture);
  }

  /** Whether `input` is a step this path runs (see the module comment); else the engine runs it. */
  static accepts(input: DecodeStepInput): boolean {
    const { sampling } = input;
    // `uncaptured` rows go to the main graph: a session that captures gave wrong log-probs for uncaptured
    // runs after its captures (lavapipe, onnxruntime 1.30: docs/ENGINE_FACTS.md), so it runs none.
    return input.width === 1 && !input.cache.stage && !input.cache.uncaptured && (input.topN ?? 0) === 0 &&
      !(input.constraints ?? []).some((c) => c && c.ids.length > 0) &&
      sampling.topK === 0 && sampling.topP === 1;
  }

  /**
   * Writes the graph's weight inputs (name → tensor, as the engine feeds its main graph: infer_graph.ts)
   * into fixed device buffers, made on the first call; a later call rewrites them in place, so graphs
   * already captured read the new values. Each call must give the same names, types and shapes. Returns
   * the buffers by name, for the engine's main session to bind (they live until this session closes).
   */
  setWeights(tensors: ReadonlyMap<string, HostTensor>): ReadonlyMap<string, DeviceTensor> {
    const pairs: [OrtTensor, DeviceTensor][] = [];
    for (const [name, t] of tensors) pairs.push([OrtTensor.of(t), this.#weightBuffer(name, t)]);
    try {
      this.#memory.upload(pairs);
    } finally {
      pairs.forEach(([h]) => h.release());
    }
    return this.#weights;
  }

  /** The fixed device buffer of weight input `name`, made on first use for `t`'s type and shape. */
  #weightBuffer(name: string, t: HostTensor): DeviceTensor {
    const known = this.#weights.get(name);
    if (known) {
      if (known.type !== t.type || known.dims.join() !== t.dims.join()) {
        throw new Error(
          `decode session: weight ${name} is ${t.type}[${t.dims}], its bound buffer ${known.type}[${known.dims}]`,
        );
      }
      return known;
    }
    if (!isDeviceType(t.type)) {
      throw new Error(`decode session: weight ${name} is ${t.type}, not a device type`);
    }
    if (this.#weightsBound) {
      throw new Error(`decode session: weight ${name} is new after a step was bound`);
    }
    const device = this.#memory.tensor(t.type, t.dims);
    this.#weights.set(name, device);
    return device;
  }

  /**
   * Runs one decode step (`DecodeSession.accepts(input)`). Uncaptured, the step's values are bound for
   * that run only, as the main session binds its own, so that no binding holds a released cache's memory;
   * under capture, through the binding's captured graph, whose bindings stay (module comment). Steps run
   * one at a time, in the order they were called (`#last`).
   */
  step(input: DecodeStepInput): Promise<DecodeStepOutput> {
    const output = this.#last.then(() => this.#step(input));
    this.#last = output.catch(() => {}); // a failed step is its caller's error; the next one still runs
    return output;
  }

  async #step(input: DecodeStepInput): Promise<DecodeStepOutput> {
    const B = input.batch;
    const io = this.#ioFor(B);
    for (let b = 0; b < B; b++) {
      io.ids[b] = BigInt(input.ids[b]);
      io.seqlens[b] = input.seqlens[b];
      io.uniforms[b] = input.uniforms[b];
    }
    io.temperature.fill(input.sampling.temperature);
    this.#memory.upload(io.staged.map((h, i) => [h, io.device[i]]));
    this.#weightsBound = true;
    const capacity = (input.cache.layers[0].key as DeviceTensor).dims[2];
    const span = attentionSpan(input.seqlens, capacity, this.captures);
    if (this.captures) this.#capturedRun(input.cache, io, span).run();
    else {
      const { inputs, outputs } = this.#values(input.cache, io, span);
      await this.#session.run(inputs, outputs);
    }
    this.steps += 1;
    this.#memory.download([io.tokens, io.logprobs]);
    return { tokens: Array.from(io.tokens[1].data, Number), logprobs: Array.from(io.logprobs[1].data) };
  }

  /** The step inputs and outputs of batch size `B`, made on first use. */
  #ioFor(B: number): StepIO {
    let io = this.#io.get(B);
    if (io) return io;
    const ids = new BigInt64Array(B), seqlens = new Int32Array(B);
    const temperature = new Float32Array(B), uniforms = new Float32Array(B);
    const staged = [
      new OrtTensor("int64", ids, [B]),
      new OrtTensor("int32", seqlens, [B]),
      new OrtTensor("float32", temperature, [B]),
      new OrtTensor("float32", uniforms, [B]),
    ];
    const memory = this.#memory;
    io = {
      staged,
      device: staged.map((h) => memory.tensor(h.type as "int64" | "int32" | "float32", h.dims)),
      ids,
      seqlens,
      temperature,
      uniforms,
      tokens: [memory.tensor("int64", [B]), new OrtTensor("int64", new BigInt64Array(B), [B])],
      logprobs: [memory.tensor("float32", [B]), new OrtTensor("float32", new Float32Array(B), [B])],
    };
    this.#io.set(B, io);
    return io;
  }

  /**
   * The graph's inputs for a step on `cache` attending over `span` positions (device tensors, and the one
   * host scalar) and its outputs (the cache in place, the token and log-prob tensors).
   */
  #values(cache: CacheBinding, io: StepIO, span: number) {
    const { past, present } = cacheIO(cache, (t) => t as DeviceTensor);
    const total = Int32Array.of(span); // read on the host; under capture only when captured (attentionSpan)
    const inputs: Record<string, DeviceTensor | HostTensor> = {
      ...past,
      ...Object.fromEntries(this.#weights), // the engine's weight inputs (setWeights)
      [IO.ids]: io.device[0],
      [IO.seqlens]: io.device[1],
      [IO.temperature]: io.device[2],
      [IO.uniforms]: io.device[3],
      [IO.total]: { type: "int32", data: total, dims: [] },
    };
    const outputs = { ...present, [IO.nextTokens]: io.tokens[0], [IO.nextLogprobs]: io.logprobs[0] };
    return { inputs, outputs };
  }

  /** The binding's captured run for `span`, bound on first use (its graph is captured by its first run). */
  #capturedRun(cache: CacheBinding, io: StepIO, span: number): FixedRun {
    let runs = this.#captured.get(cache);
    if (!runs) this.#captured.set(cache, runs = new Map());
    let run = runs.get(span);
    if (!run) {
      const values = this.#values(cache, io, span);
      const inputs: Record<string, OrtValueHandle> = {};
      for (const [name, t] of Object.entries(values.inputs)) {
        inputs[name] = t instanceof DeviceTensor ? t : OrtTensor.of(t); // kept with the binding
      }
      run = this.#session.fixedRun(inputs, values.outputs, this.#nextGraph++);
      runs.set(span, run);
    }
    return run;
  }

  /** Frees the session and the device tensors made here (the weight buffers too: close the engine's first). */
  close(): Promise<void> {
    return this.#session.close(); // frees the device tensors made here with its allocator
  }
}

/** The shortest attention span a captured graph takes (see `attentionSpan`). */
export const CAPTURE_SPAN_MIN = 256;

/**
 * GroupQueryAttention's total length for a decode step whose sequences write their new token at `seqlens`,
 * in a cache of `capacity` positions. The kernel attends over that many positions, masking each sequence
 * past its own length, so its work follows the span, not the sequences (measured on lavapipe: a step in a
 * 16,384-position cache took 4× as long with the capacity as its span as with the longest sequence's
 * length). Uncaptured, the span is the longest sequence's length, as on the main graph (engine.ts). A
 * captured graph reads it once, when it is captured, so there it is the smallest of `CAPTURE_SPAN_MIN`,
 * twice that, and so on, that holds the longest sequence, at most the capacity: a binding's captured
 * graphs number at most log2(capacity / CAPTURE_SPAN_MIN) + 1, each attending over less than twice what
 * the step needs.
 */
export function attentionSpan(seqlens: ArrayLike<number>, capacity: number, captured: boolean): number {
  const needed = Math.max(...Array.from(seqlens)) + 1;
  if (needed > capacity) {
    throw new Error(`decode step: a sequence reaches position ${needed - 1} of a ${capacity}-position cache`);
  }
  if (!captured) return needed;
  let span = CAPTURE_SPAN_MIN;
  while (span < needed) span *= 2;
  return Math.min(span, capacity);
}

/**
 * onnxruntime's refusal to capture the decode graph, said as such (the provider started; the graph is what
 * it refused: control flow, or a node on the CPU between device nodes); any other error as it is.
 */
export function captureRefusal(e: unknown): unknown {
  const message = e instanceof Error ? e.message : String(e);
  // onnxruntime's sentence only: the engine's session error adds the provider check's fix after it.
  const refusal = /This session cannot use the graph capture feature[^\n]*?(?:\.(?=\s|$)|$)/.exec(message);
  if (!refusal) return e;
  return new UserError("model.webgpu.graph_capture", {
    value: true,
    why: `onnxruntime refused to capture the decode graph: ${
      refusal[0].replace(/\s+/g, " ").trim().replace(/\.$/, "")
    }`,
    fix: "set model.webgpu.graph_capture false; the decode graph must have no If and no CPU node between " +
      'device nodes (docs/ENGINE_FACTS.md, "Graph capture of the decode step")',
  });
}

function isDeviceType(type: string): type is DeviceElementType {
  return type === "float32" || type === "float16" || type === "int32" || type === "int64";
}
