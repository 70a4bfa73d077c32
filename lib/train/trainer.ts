/**
 * `Trainer`: the train graph's session. One call per micro-batch gives the LoRA gradients of that
 * micro-batch's share of the loss, the loss, and per-row log-probs and loss parts.
 *
 * The session is the engine's (lib/engine/session.ts): through FFI every output (gradients, log-probs,
 * loss parts) is written by onnxruntime into arrays allocated here before the run, so nothing is copied
 * after it; the Node binding is used only where FFI is unavailable. Given `options.sharedWeights`, the
 * graph reads the model's weights from that shared memory, the same copy an inference engine in this
 * process reads (lib/model/shared_weights.ts). The passes that read no gradient run the graph's forward alone
 * in a second session where that gives the same floats (`Trainer.forwardAlone`).
 *
 * @module
 */

import type { ModelDir } from "../model/model_dir.ts";
import { headChunkRows } from "../model/graph/head.ts";
import { groupedLora, loraGroupSpecs } from "../model/graph/lora_inputs.ts";
import { loraScale, type LoraSpec, loraTensorSpecs, type LoraWeights } from "../model/lora.ts";
import {
  type EngineSession,
  openEngineSession,
  type SessionOptions,
  sessionWeights,
} from "../engine/session.ts";
import type { HostTensor } from "../ort/value.ts";
import type { MicroBatch } from "./batch.ts";
import { buildTrainModel, TRAIN_IO, type TrainGraphSpec } from "./train_graph.ts";
import { ungroupGradients } from "./lora_groups.ts";
import { policyLossOf, tokenInputsOf, valueLossOf } from "./algorithm.ts";
import type { TokenInput } from "../losses/objective.ts";
import { paramsRevision, type Tensors } from "./optimizer.ts";
import { sizeOf, VALUE_IO, valueHeadSpecs } from "./value_head.ts";

/**
 * The run's scalars. A loss's declared scalars (lib/losses/types.ts `LossScalar`) are fed by key from
 * `loss`; the three that PPO's clip family shares also have fields of their own, which `loss` overrides.
 */
export interface LossScalars {
  temperature: number;
  epsLow: number;
  epsHigh: number;
  beta: number;
  /** Every declared scalar of the loss by its `train.loss` key (lib/pipeline/train.ts fills it). */
  loss?: Readonly<Record<string, number>>;
  /** With a value head: the value loss's weight (train.value.vf_coef). */
  vfCoef?: number;
  /** With a value head: the value clip range (train.value.clip; unused by the squared loss). */
  valueClip?: number;
}

/** How the trainer opens its sessions: the engine's options, and whether a GPU runs the forward alone. */
export interface TrainerOptions extends SessionOptions {
  /**
   * On WebGPU, whether the passes that read no gradient open a second session with the forward alone
   * (`Trainer.forwardAlone`; `model.webgpu.forward_session`). Default true.
   */
  forwardSession?: boolean;
}

/**
 * onnxruntime fusions that apply to the train graph's forward alone but not to the whole graph, where the
 * backward also reads the value they would fuse away: Div(1, t) · x into x / t (DivMulFusion; the head's
 * 1/temperature) and x · Sigmoid(x) into QuickGelu (QuickGeluFusion; SwiGLU's SiLU). On WebGPU each rounds
 * differently from the unfused nodes (on lavapipe 58 of 192 float32 log-probs of the forward alone
 * differed from the whole graph's in their last bits with onnxruntime's defaults, none without these two),
 * so the trainer's WebGPU sessions leave both out; the whole graph loses nothing (its nodes are the same).
 */
export const FORWARD_ALONE_FUSIONS = ["DivMulFusion", "QuickGeluFusion"] as const;

/**
 * On WebGPU the train graph's one Transpose of q/k/v into heads (lib/train/attention.ts) runs as two when
 * onnxruntime moves it below the Split that follows (the level-1 `TransposeOptimizer`, and the same
 * optimization inside the layout transformation of a provider preferring NHWC, WebGPU's default): one more
 * dispatch a layer, 28 in a 28-layer train run, and no Transpose saved elsewhere (measured on lavapipe,
 * Nov 29: 2,779 → 2,751 dispatches in float32, 2,922 → 2,894 in float16; the forward alone unchanged). The
 * graphs have no layout-sensitive op (no Conv), so the trainer's WebGPU sessions prefer NCHW, which skips
 * that transformation, and leave the optimizer out. A Transpose moves values; the floats are the same.
 */
const WEBGPU_TRANSPOSE_AS_BUILT = {
  disabledOptimizers: ["TransposeOptimizer"],
  providerOptions: { preferredLayout: "NCHW" },
} as const;

/** What one run of the graph uses besides the micro-batch, the LoRA tensors and the scalars. */
export interface RunOptions {
  /** LoRA scale (default the spec's; 0 runs the base model: the reference pass). */
  scale?: number;
  /** The value head's tensors; required when the graph has a value head. */
  valueHead?: Tensors;
}

/** What one micro-batch gives. Per-row arrays are `[M]`, one per head row (`MicroBatch.headRows`). */
export interface MicroResult {
  loss: number;
  grads: Map<string, Float32Array>;
  logprobs: Float32Array;
  pg: Float32Array;
  kl: Float32Array;
  clipped: Float32Array;
  entropy: Float32Array;
  /** With a value head: V per head row, Σ weight · lv, and the head's gradients (of the whole loss). */
  value?: { values: Float32Array; loss: number; grads: Map<string, Float32Array> };
}

export class Trainer {
  readonly model: ModelDir;
  readonly spec: TrainGraphSpec & { lora: LoraSpec };
  /** Rows of logits the head computes at once, at most. */
  readonly maxChunk: number;
  /** The graph's per-token inputs, as the algorithm declares them (algorithm.ts). */
  readonly tokenInputs: readonly TokenInput[];
  readonly #session: EngineSession;
  /** The forward alone (`buildTrainModel`'s forwardOnly), opened at the first `forward` call. */
  #forward: Promise<EngineSession> | null = null;
  readonly #sessionOptions: TrainerOptions;
  /**
   * The group tensors built per parameter map and LoRA scale (the reference pass runs the base model at 0,
   * or the run's starting adapter at the policy's scale): every micro-batch of an optimizer step reads the
   * same parameters, so each map's tensors are rebuilt only when its revision (`paramsRevision`, advanced by
   * each optimizer step) changes, and a reference pass between two policy passes rebuilds neither.
   */
  readonly #grouped = new WeakMap<LoraWeights, Map<number, GroupFeeds>>();
  #groupBuilds = 0;

  private constructor(
    model: ModelDir,
    spec: TrainGraphSpec & { lora: LoraSpec },
    session: EngineSession,
    sessionOptions: TrainerOptions,
  ) {
    this.model = model;
    this.spec = spec;
    this.#session = session;
    this.#sessionOptions = sessionOptions;
    this.maxChunk = headChunkRows(model.config.vocab_size);
    this.tokenInputs = tokenInputsOf(spec);
  }

  /**
   * Train graphs built and sessions opened in this process (a run should build one: tests count; the
   * forward-alone session of `logprobs` is not counted).
   */
  static created = 0;

  /** Builds the train graph for `spec` and opens its session (seconds for a large model). */
  static async create(
    model: ModelDir,
    spec: TrainGraphSpec & { lora: LoraSpec },
    options: TrainerOptions = {},
  ): Promise<Trainer> {
    const sessionOptions: TrainerOptions = { ...options, ep: spec.ep, compute: spec.compute };
    if (spec.ep === "webgpu") {
      sessionOptions.disabledOptimizers = [
        ...options.disabledOptimizers ?? [],
        ...FORWARD_ALONE_FUSIONS,
        ...WEBGPU_TRANSPOSE_AS_BUILT.disabledOptimizers,
      ];
      sessionOptions.providerOptions = {
        ...options.providerOptions,
        ...WEBGPU_TRANSPOSE_AS_BUILT.providerOptions,
      };
    }
    const built = buildTrainModel(model, spec, sessionWeights(sessionOptions));
    const session = await openEngineSession(built.bytes, built.externalFolder, sessionOptions, built.shared);
    Trainer.created++;
    return new Trainer(model, spec, session, sessionOptions);
  }

  /** Group layouts of the parameters built so far: one per optimizer step and LoRA scale (tests count). */
  get groupBuilds(): number {
    return this.#groupBuilds;
  }

  /** Whether the session runs through FFI (outputs written in place) or the Node binding. */
  get backend(): EngineSession["backend"] {
    return this.#session.backend;
  }

  /** Whether the graph has a value head (the algorithm declares one). */
  get hasValueHead(): boolean {
    return valueLossOf(this.spec) !== undefined;
  }

  /** Forward and backward over one micro-batch with LoRA `params` (and the value head, when it has one). */
  async run(mb: MicroBatch, params: LoraWeights, s: LossScalars, o: RunOptions = {}): Promise<MicroResult> {
    const scale = o.scale ?? loraScale(this.spec.lora);
    const inputs = this.#inputs(mb, params, s, scale);
    const cfg = this.model.config;
    const keys = loraTensorSpecs(cfg, this.spec.lora);
    const groups = loraGroupSpecs(cfg, this.spec.lora).flatMap((spec) => [spec.a, spec.b]);
    const half = this.spec.compute === "float16";
    const tensor = (data: Float32Array | Float16Array, dims: number[]): HostTensor =>
      data instanceof Float16Array ? { type: "float16", data, dims } : f32(data, dims);
    const groupGrads = new Map(groups.map((t) => {
      const size = t.dims[0] * t.dims[1];
      return [t.name, half ? new Float16Array(size) : new Float32Array(size)];
    }));

    // Every output is allocated here and written in place by the run.
    const rows = () => new Float32Array(mb.headRows.length);
    const result: MicroResult = {
      loss: 0,
      grads: new Map(keys.map((t) => [t.key, new Float32Array(t.dims[0] * t.dims[1])])),
      logprobs: rows(),
      pg: rows(),
      kl: rows(),
      clipped: rows(),
      entropy: rows(),
    };
    const loss = new Float32Array(1);
    const head = [mb.headRows.length];
    const outputs: Record<string, HostTensor> = {
      [TRAIN_IO.loss]: f32(loss, []),
      [TRAIN_IO.logprobs]: f32(result.logprobs, head),
      [TRAIN_IO.pg]: f32(result.pg, head),
      [TRAIN_IO.kl]: f32(result.kl, head),
      [TRAIN_IO.clipped]: f32(result.clipped, head),
      [TRAIN_IO.entropy]: f32(result.entropy, head),
    };
    for (const t of groups) outputs[TRAIN_IO.grad(t.name)] = tensor(groupGrads.get(t.name)!, t.dims);
    const value = this.hasValueHead ? this.#valueFeeds(mb, s, o.valueHead, inputs, outputs) : undefined;
    await this.#session.run(inputs, outputs);
    ungroupGradients(cfg, this.spec.lora, groupGrads, scale, result.grads);
    result.loss = loss[0];
    if (value) result.value = { values: value.values, loss: value.loss[0], grads: value.grads };
    return result;
  }

  /**
   * Whether `forward` and `logprobs` run the train graph's forward alone, in a second session: on the CPU
   * over shared weights (the same one copy), and on WebGPU unless `forwardSession` is false (a second copy
   * of the weights in GPU memory, for about a third of the whole graph's kernels). Its log-probs are `run`'s
   * floats bit for bit, so that on policy every ratio is exactly 1: on WebGPU because both sessions leave
   * out the fusions that only the forward alone could make (`FORWARD_ALONE_FUSIONS`). Elsewhere (the CPU
   * without shared weights, which would need a second copy of the weights; other providers, where this is
   * unmeasured) it runs the whole graph and discards the gradients.
   */
  get forwardAlone(): boolean {
    const o = this.#sessionOptions;
    return sessionWeights(o) !== undefined || (o.ep === "webgpu" && o.forwardSession !== false);
  }

  /**
   * The log-probs of one micro-batch's head rows, the same floats as `run`'s, for the passes that read no
   * gradient (passes.ts: the reference, the trainer-side old log-probs, GSPO's sequence ratio): `forward`'s.
   */
  async logprobs(
    mb: MicroBatch,
    params: LoraWeights,
    s: LossScalars,
    o: RunOptions = {},
  ): Promise<Float32Array> {
    return (await this.forward(mb, params, s, o)).logprobs;
  }

  /**
   * The forward's outputs of one micro-batch, the same floats as `run`'s: the log-probs of its head rows and,
   * with a value head, its values (values_pass.ts). Where `forwardAlone`, a second session over the same
   * graph with those outputs, built and opened at the first call: onnxruntime runs only the forward (about
   * half the time of forward and backward).
   */
  async forward(
    mb: MicroBatch,
    params: LoraWeights,
    s: LossScalars,
    o: RunOptions = {},
  ): Promise<{ logprobs: Float32Array; values?: Float32Array }> {
    if (!this.forwardAlone) {
      const whole = await this.run(mb, params, s, o);
      return { logprobs: whole.logprobs, values: whole.value?.values };
    }
    const session = await (this.#forward ??= this.#openForward());
    const inputs = this.#inputs(mb, params, s, o.scale ?? loraScale(this.spec.lora));
    const M = mb.headRows.length;
    const logprobs = new Float32Array(M);
    const outputs: Record<string, HostTensor> = { [TRAIN_IO.logprobs]: f32(logprobs, [M]) };
    let values: Float32Array | undefined;
    if (this.hasValueHead) {
      this.#valueFeeds(mb, s, o.valueHead, inputs, {});
      outputs[VALUE_IO.values] = f32(values = new Float32Array(M), [M]);
    }
    await session.run(inputs, outputs);
    return { logprobs, values };
  }

  async #openForward(): Promise<EngineSession> {
    const o = this.#sessionOptions;
    const built = buildTrainModel(this.model, this.spec, sessionWeights(o), true);
    return await openEngineSession(built.bytes, built.externalFolder, o, built.shared);
  }

  /** The graph inputs of one micro-batch, the value head's aside: tokens, per-token inputs, scalars, adapter. */
  #inputs(mb: MicroBatch, params: LoraWeights, s: LossScalars, scale: number): Record<string, HostTensor> {
    const dims = [mb.rows, mb.width];
    const head = [mb.headRows.length];
    const i64 = (data: BigInt64Array, shape = dims): HostTensor => ({ type: "int64", data, dims: shape });
    const scalar = (v: number) => f32(Float32Array.of(v), []);
    const inputs: Record<string, HostTensor> = {
      [TRAIN_IO.ids]: i64(mb.ids),
      [TRAIN_IO.positions]: i64(mb.positions),
      [TRAIN_IO.headRows]: i64(mb.headRows, head),
      [TRAIN_IO.targets]: i64(mb.targets, head),
      [TRAIN_IO.weights]: f32(mb.weights, head),
      [TRAIN_IO.temperature]: scalar(s.temperature),
      [TRAIN_IO.chunk]: i64(BigInt64Array.of(BigInt(mb.chunk)), []),
    };
    for (const input of this.tokenInputs) inputs[input.name] = f32(this.#tokenFeed(mb, input), head);
    for (const { key } of policyLossOf(this.spec).scalars) inputs[key] = scalar(scalarValue(s, key));
    const cfg = this.model.config;
    const groups = loraGroupSpecs(cfg, this.spec.lora).flatMap((spec) => [spec.a, spec.b]);
    const grouped = this.#groupFeeds(params, scale);
    // The group tensors and their gradients are in the compute dtype (train_graph.ts).
    for (const t of groups) {
      const data = grouped.get(t.name)!;
      inputs[t.name] = data instanceof Float16Array
        ? { type: "float16", data, dims: t.dims }
        : f32(data, t.dims);
    }
    return inputs;
  }

  /** `params` in the groups layout at `scale`, in the compute dtype: cached until the parameters change. */
  #groupFeeds(params: LoraWeights, scale: number): Map<string, Float32Array | Float16Array> {
    const revision = paramsRevision(params);
    const byScale = this.#grouped.get(params) ?? new Map<number, GroupFeeds>();
    this.#grouped.set(params, byScale);
    const cached = byScale.get(scale);
    if (cached && cached.revision === revision) return cached.tensors;
    const half = this.spec.compute === "float16";
    const grouped = groupedLora(this.model.config, this.spec.lora, params, scale);
    const tensors = new Map(
      [...grouped].map(([name, data]) => [name, half ? Float16Array.from(data) : data]),
    );
    byScale.set(scale, { revision, tensors });
    this.#groupBuilds += 1;
    return tensors;
  }

  /** The value head's inputs (its tensors, vf_coef, value_clip) and its outputs, allocated here. */
  #valueFeeds(
    mb: MicroBatch,
    s: LossScalars,
    head: Tensors | undefined,
    inputs: Record<string, HostTensor>,
    outputs: Record<string, HostTensor>,
  ) {
    if (!head) throw new Error("trainer: the graph has a value head and no value-head tensors were given");
    const M = mb.headRows.length;
    const f32 = (data: Float32Array, dims: number[]): HostTensor => ({ type: "float32", data, dims });
    inputs[VALUE_IO.vfCoef] = f32(Float32Array.of(s.vfCoef ?? 0), []);
    inputs[VALUE_IO.clip] = f32(Float32Array.of(s.valueClip ?? 0), []);
    const grads = new Map<string, Float32Array>();
    for (const t of valueHeadSpecs(this.model.config.hidden_size)) {
      inputs[t.key] = f32(head.get(t.key)!, t.dims);
      grads.set(t.key, new Float32Array(sizeOf(t.dims)));
      outputs[TRAIN_IO.grad(t.key)] = f32(grads.get(t.key)!, t.dims);
    }
    const values = new Float32Array(M), loss = new Float32Array(1);
    outputs[VALUE_IO.values] = f32(values, [M]);
    outputs[VALUE_IO.valueLoss] = f32(loss, []);
    return { values, loss, grads };
  }

  /**
   * A declared per-token input of `mb`. One the trainer computes itself (the reference log-probs) is
   * zeros while it is being computed (its pass reads only the log-probs); any other must be there.
   */
  #tokenFeed(mb: MicroBatch, input: TokenInput): Float32Array {
    const values = mb.inputs[input.name];
    if (values) return values;
    if (input.column === null) return new Float32Array(mb.headRows.length);
    throw new Error(`trainer: the micro-batch has no ${input.name} (from column ${input.column})`);
  }

  async close(): Promise<void> {
    const forward = this.#forward;
    this.#forward = null;
    await this.#session.close();
    if (forward) await (await forward).close();
  }
}

/** The group tensors built from one parameter map at one of its revisions. */
interface GroupFeeds {
  revision: number;
  tensors: Map<string, Float32Array | Float16Array>;
}

/** The clip family's scalars by key, from their own fields of `LossScalars`. */
const SHARED_SCALARS: Readonly<Record<string, (s: LossScalars) => number>> = {
  eps_low: (s) => s.epsLow,
  eps_high: (s) => s.epsHigh,
  beta: (s) => s.beta,
};

/** The value of the declared scalar `key`: from `s.loss`, else the shared fields; missing is a bug. */
function scalarValue(s: LossScalars, key: string): number {
  const value = s.loss?.[key] ?? SHARED_SCALARS[key]?.(s);
  if (value === undefined) throw new Error(`trainer: the loss declares scalar ${key} and none was given`);
  return value;
}

function f32(data: Float32Array, dims: readonly number[]): HostTensor {
  return { type: "float32", data, dims: [...dims] };
}
