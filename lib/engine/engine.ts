/**
 * `InferenceEngine`: one onnxruntime session over the inference graph (infer_graph.ts) plus the
 * current adapter's feeds. It scores sequences (`score`) and runs the steps a generation batch needs
 * (`step`); generate.ts drives those steps. Everything here runs on the thread that owns the
 * session (a Worker, see worker.ts).
 *
 * Every run writes its outputs into arrays given to it (session.ts): the KV cache, which is also the past
 * input, and small arrays for sampled tokens and log-probs. The adapter's tensors and each cache view are
 * bound to the session once and reused by every run that feeds them. An engine with an adapter shape takes
 * the adapter merged into its Linears (merged_weights.ts), merged again whenever the adapter is set, or
 * unmerged, per group of Linears (lora_inputs.ts `groups`): merged on GPU providers and unmerged on the CPU
 * unless told otherwise (`mergesAdapter`). On a GPU provider the cache lives in device memory
 * (device_cache.ts) and the adapter's feeds are uploaded once per adapter (device_session.ts), so a decode
 * step sends token ids and sampling inputs to the device and brings back sampled ids and log-probs only.
 * Scoring is in scoring.ts.
 *
 * @module
 */

import type { ModelDir } from "../model/model_dir.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { type LoraShape, loraTensorSpecs, type LoraWeights, zeroLoraWeights } from "../model/lora.ts";
import { groupedLora, loraGroupSpecs } from "../model/graph/lora_inputs.ts";
import { MergedWeights, mergesAdapter } from "./merged_weights.ts";
import { buildInferenceModel, IO } from "./infer_graph.ts";
import { type ComputeDtype, graphForms } from "../model/graph/forms.ts";
import type { DeviceTensor } from "../ort/device.ts";
import type { HostTensor } from "../ort/value.ts";
import {
  type BatchCache,
  type CacheBinding,
  type CacheIO,
  cacheIO,
  emptyCache,
  KvCache,
} from "./kv_cache.ts";
import { DeviceKvCache } from "./device_cache.ts";
import { CachePool } from "./cache_pool.ts";
import { DecodeSession } from "./decode_session.ts";
import { attentionTokenLimit } from "./attention_probe.ts";
import { type Alternatives, type ScoredWithAlternatives, Scorer } from "./scoring.ts";
import {
  bool,
  constraintFeeds,
  int32,
  int64,
  type RowConstraints,
  samplingFeeds,
  type SamplingParams,
} from "./feeds.ts";
import {
  type BoundTensor,
  type EngineSession,
  openEngineSession,
  type SessionOptions,
  sessionWeights,
} from "./session.ts";

/** One step of a generation batch: new tokens for every sequence of the binding. */
export interface StepInput {
  /** `[B, S]` token ids, right-padded. */
  ids: ArrayLike<number>;
  batch: number;
  width: number;
  /** Per sequence: index of its last new position, `cache length after the step - 1`. */
  seqlens: ArrayLike<number>;
  /** Per sequence: which of the S rows to sample from (its last real new token). */
  sampleAt: ArrayLike<number>;
  uniforms: ArrayLike<number>;
  sampling: SamplingParams;
  cache: CacheBinding;
  /** Per sequence: constraints on what it may sample (absent or null: none). */
  constraints?: readonly (RowConstraints | null)[];
  /** Alternatives to return per sequence (default 0). */
  topN?: number;
}

/** A sampled token per sequence. */
export interface StepOutput {
  tokens: number[];
  logprobs: number[];
  /** Per sequence, when `topN` > 0. */
  top?: Alternatives[];
}

export type { Alternatives, ScoredWithAlternatives } from "./scoring.ts";

/** Options of `InferenceEngine.create`. */
export interface EngineOptions extends SessionOptions {
  /** Feed the adapter merged into the Linears (default: on GPU providers only; `mergesAdapter`). */
  mergeAdapter?: boolean;
}

export class InferenceEngine {
  readonly config: Qwen3Config;
  readonly lora: LoraShape | null;
  readonly #session: EngineSession;
  readonly #scorer: Scorer;
  /**
   * The plain decode steps' own session over the If-free decode graph (`usesDecodeGraph`), captured or
   * not, else null: all steps run on the main session.
   */
  readonly #decode: DecodeSession | null;
  /** Empty float16 device caches by batch size (scoring without a cache). */
  readonly #empties = new Map<number, DeviceTensor>();
  /** With a merged adapter: the Linear stacks, merged per adapter (null: the graph holds its own). */
  readonly #merged: MergedWeights | null;
  #adapterFeeds: Record<string, BoundTensor> = {};
  /** Past inputs and present outputs of each cache binding seen, bound once. */
  readonly #caches = new WeakMap<CacheBinding, CacheIO<BoundTensor>>();
  /** Under graph capture, the caches `createCache` lends, kept for reuse (cache_pool.ts); else null. */
  readonly #cachePool: CachePool | null;

  /**
   * Most new tokens one call may carry (Infinity: no limit). Finite where the provider's attention was
   * found wrong for longer calls (attention_probe.ts): prefills, continuations and scoring then go in
   * pieces.
   */
  readonly maxStepTokens: number;
  /** The dtype of the KV cache (the compute dtype). */
  readonly #compute: ComputeDtype;

  private constructor(
    config: Qwen3Config,
    lora: LoraShape | null,
    session: EngineSession,
    maxStepTokens: number,
    compute: ComputeDtype,
    merged: MergedWeights | null,
    decode: DecodeSession | null,
  ) {
    this.config = config;
    this.lora = lora;
    this.#merged = merged;
    this.#session = session;
    this.#decode = decode;
    this.#cachePool = decode?.captures ? new CachePool() : null;
    this.maxStepTokens = maxStepTokens;
    this.#compute = compute;
    this.#scorer = new Scorer({
      config,
      maxStepTokens,
      adapterFeeds: () => this.#adapterFeeds,
      createCache: (batch, capacity) => this.#newCache(batch, capacity), // no decode step reads it: not pooled
      emptyCache: (batch) => this.#emptyCache(batch),
      bindCache: (cache) => this.#cache(cache),
      run: (inputs, outputs) => this.#session.run(inputs, outputs),
    });
  }

  /**
   * Builds the graph for `model` for adapters of `lora`'s shape (merged or not: `options.mergeAdapter`),
   * and opens its session.
   */
  static async create(
    model: ModelDir,
    lora: LoraShape | null,
    options: EngineOptions,
  ): Promise<InferenceEngine> {
    const forms = graphForms(options.ep, options.compute);
    const merge = lora !== null && mergesAdapter(options.mergeAdapter, options.ep);
    const form = merge ? "merged" : "unmerged";
    const built = buildInferenceModel(model, lora, forms, sessionWeights(options), "all", form);
    const session = await openEngineSession(built.bytes, built.externalFolder, options, built.shared);
    const limit = session.device
      ? attentionTokenLimit(options.ep ?? "cpu", model.config, options.providerOptions, forms.attentionNorms)
      : Infinity;
    let merged: MergedWeights | null = null;
    let decode: DecodeSession | null = null;
    try {
      merged = merge
        ? await MergedWeights.create(model, lora, forms.compute, options.sharedWeights, options.threads)
        : null;
      decode = usesDecodeGraph(options, session)
        ? await DecodeSession.open(model, lora, forms, options, form, options.graphCapture ?? false)
        : null;
    } catch (e) {
      await merged?.close();
      await session.close();
      throw e;
    }
    const engine = new InferenceEngine(model.config, lora, session, limit, forms.compute, merged, decode);
    await engine.setLoraWeights(null, 0);
    return engine;
  }

  /** Decode steps run on the decode graph so far, captured or not (0 where it is not used). */
  get decodeGraphSteps(): number {
    return this.#decode?.steps ?? 0;
  }

  /** Decode steps run under graph capture so far (0 without `SessionOptions.graphCapture`). */
  get capturedDecodeSteps(): number {
    return this.#decode?.captures ? this.#decode.steps : 0;
  }

  /**
   * Graphs captured so far: one per cache binding and attention span (decode_session.ts `attentionSpan`);
   * 0 without `SessionOptions.graphCapture`.
   */
  get capturedDecodeGraphs(): number {
    return this.#decode?.capturedGraphs ?? 0;
  }

  /** Whether this engine takes its adapter merged into the Linears (false: none, or unmerged). */
  get adapterMerged(): boolean {
    return this.#merged !== null;
  }

  /** Feeds an adapter of this engine's shape (`null`: the base model). */
  async setLoraWeights(weights: LoraWeights | null, scale: number): Promise<void> {
    if (!this.lora) return;
    for (const t of weights ? loraTensorSpecs(this.config, this.lora) : []) {
      const data = weights!.get(t.key);
      if (!data || data.length !== t.dims[0] * t.dims[1]) {
        throw new Error(
          `adapter tensor ${t.key}: expected ${t.dims[0]}×${t.dims[1]} floats, got ${data?.length}`,
        );
      }
    }
    const tensors = this.#merged
      ? await this.#merged.merged(weights, scale)
      : this.#groupedTensors(this.lora, weights ?? zeroLoraWeights(this.config, this.lora), scale);
    this.#feedAdapter(tensors);
  }

  /**
   * Binds the graph's adapter inputs (name → tensor: the merged Linears, or the grouped LoRA tensors) to the
   * main session. With a decode session, whose graph has the same inputs (infer_graph.ts), they are written
   * into its fixed device buffers and the main session binds those: one copy on the device.
   */
  #feedAdapter(tensors: ReadonlyMap<string, HostTensor>): void {
    const feeds: Record<string, BoundTensor> = {};
    const device = this.#decode?.setWeights(tensors);
    for (const [name, tensor] of tensors) feeds[name] = this.#session.bind(device?.get(name) ?? tensor);
    this.#releaseAdapter();
    this.#adapterFeeds = feeds;
  }

  /** The unmerged graph's adapter inputs, per group of Linears with the scale folded in (lora_inputs.ts). */
  #groupedTensors(lora: LoraShape, weights: LoraWeights, scale: number): Map<string, HostTensor> {
    const grouped = groupedLora(this.config, lora, weights, scale);
    const tensors = new Map<string, HostTensor>();
    for (const spec of loraGroupSpecs(this.config, lora)) {
      for (const t of [spec.a, spec.b]) {
        const data = grouped.get(t.name)!;
        tensors.set(
          t.name,
          this.#compute === "float16"
            ? { type: "float16", data: Float16Array.from(data), dims: t.dims }
            : { type: "float32", data, dims: t.dims },
        );
      }
    }
    return tensors;
  }

  #releaseAdapter(): void {
    Object.values(this.#adapterFeeds).forEach((t) => t.release());
    this.#adapterFeeds = {};
  }

  /**
   * A KV cache for `batch` sequences of `capacity` positions: in device memory on a GPU provider (the
   * decode steps then read and write it there), else in JS memory. Under graph capture, one released
   * before with that size and capacity where there is one (cache_pool.ts: its graphs are replayed, not
   * captured again, and no memory is added); past the pool's limit a new one whose decode steps run on
   * the main graph, unless `lasting` (a cache kept for the owner's life: a policy's rollout scheduler).
   */
  createCache(batch: number, capacity: number, lasting = false): BatchCache {
    const pool = this.#cachePool;
    return pool
      ? pool.take(batch, capacity, () => this.#newCache(batch, capacity), lasting)
      : this.#newCache(batch, capacity);
  }

  #newCache(batch: number, capacity: number): BatchCache {
    const device = this.#session.device;
    return device
      ? new DeviceKvCache(this.config, batch, capacity, device, this.#compute)
      : new KvCache(this.config, batch, capacity);
  }

  /** An empty cache `[B, nKV, 0, D]` per layer, for scoring calls, which need none (in the cache's dtype). */
  #emptyCache(batch: number): CacheBinding {
    const device = this.#session.device;
    if (!device || this.#compute === "float32") return emptyCache(this.config, batch);
    let empty = this.#empties.get(batch);
    if (!empty) {
      const dims = [batch, this.config.num_key_value_heads, 0, this.config.head_dim];
      this.#empties.set(batch, empty = device.tensor(this.#compute, dims)); // freed with the session
    }
    const layer = { key: empty, value: empty };
    return { layers: Array.from({ length: this.config.num_hidden_layers }, () => layer) };
  }

  /** The cache's past inputs and present outputs, bound on first use (freed when the GC drops the cache). */
  #cache(cache: CacheBinding): CacheIO<BoundTensor> {
    let bound = this.#caches.get(cache);
    if (!bound) {
      bound = cacheIO(cache, (t) => this.#session.bind(t));
      this.#caches.set(cache, bound);
    }
    return bound;
  }

  /**
   * Log-probs of each sequence's tokens: entry 0 NaN, entry t = log p(seq[t] | seq[<t]) under
   * softmax(logits / temperature). Sequences are packed into calls of at most `tokenBudget` padded
   * tokens (a longer sequence gets a call of its own). See scoring.ts.
   */
  score(
    seqs: readonly (readonly number[])[],
    temperature: number,
    tokenBudget: number,
  ): Promise<Float32Array[]> {
    return this.#scorer.score(seqs, temperature, tokenBudget);
  }

  /**
   * `score` plus the `k` most likely tokens at every position (position t: the alternatives to token t,
   * given the tokens before it), from the same pass over the head as `score`'s log-probs.
   */
  scoreWithAlternatives(
    seqs: readonly (readonly number[])[],
    temperature: number,
    k: number,
  ): Promise<ScoredWithAlternatives[]> {
    return this.#scorer.scoreWithAlternatives(seqs, temperature, k);
  }

  /** Runs one generation step (prefill, decode or continuation) and returns the sampled tokens. */
  async step(input: StepInput): Promise<StepOutput> {
    if (this.#decode && DecodeSession.accepts(input)) return this.#decode.step(input);
    const { batch: B, width: S } = input;
    const total = Math.max(...Array.from(input.seqlens)) + 1;
    const cache = this.#cache(input.cache);
    const feeds = {
      ...this.#adapterFeeds,
      ...cache.past,
      ...samplingFeeds(input.sampling, input.uniforms, this.config.vocab_size),
      [IO.ids]: int64(input.ids, [B, S]),
      [IO.seqlens]: int32(input.seqlens, [B]),
      [IO.total]: int32([total], []),
      [IO.scoreMode]: bool(false),
      [IO.targets]: { type: "int64", data: new BigInt64Array(B * S), dims: [B, S] } as const, // read in score mode only
      [IO.sampleRows]: int64(Array.from(input.sampleAt, (s, b) => b * S + s), [B]),
      ...constraintFeeds(input.constraints, B),
      [IO.topN]: int64([input.topN ?? 0], [1]),
      [IO.scoreTop]: int64([0], [1]),
    };
    const tokens = new BigInt64Array(B); // [B]
    const logprobs = new Float32Array(B); // [B]
    const n = input.topN ?? 0;
    const topIds = new BigInt64Array(B * n); // [B, n]
    const topLogprobs = new Float32Array(B * n); // [B, n]
    input.cache.stage?.before();
    await this.#session.run(feeds, {
      ...cache.present,
      [IO.nextTokens]: { type: "int64", data: tokens, dims: [B] },
      [IO.nextLogprobs]: { type: "float32", data: logprobs, dims: [B] },
      ...(n > 0
        ? {
          [IO.nextTopIds]: { type: "int64", data: topIds, dims: [B, n] },
          [IO.nextTopLogprobs]: { type: "float32", data: topLogprobs, dims: [B, n] },
        }
        : {}),
    });
    input.cache.stage?.after();
    const out: StepOutput = { tokens: Array.from(tokens, Number), logprobs: Array.from(logprobs) };
    if (n > 0) {
      out.top = Array.from({ length: B }, (_, b) => ({
        ids: Array.from(topIds.subarray(b * n, (b + 1) * n), Number),
        logprobs: Array.from(topLogprobs.subarray(b * n, (b + 1) * n)),
      }));
    }
    return out;
  }

  async close(): Promise<void> {
    this.#releaseAdapter();
    await this.#merged?.close();
    // The decode session first: its bindings hold the caches the main session's memory made. The main
    // session binds the decode session's weight buffers only during a run.
    await this.#decode?.close();
    this.#cachePool?.release(); // after the decode session, whose captured graphs bind them
    await this.#session.close();
  }
}

/**
 * Whether an engine runs its plain decode steps in a decode session (decode_session.ts): on WebGPU where
 * its main session binds device memory (FFI; through onnxruntime-node it cannot) unless `decodeGraph` is
 * false, and wherever graph capture is asked for (the decode session refuses what cannot capture).
 */
function usesDecodeGraph(options: EngineOptions, main: EngineSession): boolean {
  if (options.graphCapture) return true;
  return options.ep === "webgpu" && options.decodeGraph !== false && main.device !== null;
}
