/**
 * `InferenceEngine`: one onnxruntime session over the inference graph (infer_graph.ts) plus the
 * current adapter's feeds. It scores sequences (`score`) and runs the steps a generation batch needs
 * (`step`); generate.ts drives those steps. Everything here runs on the thread that owns the
 * session (a Worker, see worker.ts).
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import type { ModelDir } from "../model/model_dir.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { type LoraShape, loraTensorSpecs, type LoraWeights, zeroLoraWeights } from "../model/lora.ts";
import { LORA_SCALE_INPUT } from "../model/graph/lora_inputs.ts";
import { buildInferenceModel, IO } from "./infer_graph.ts";
import { type CacheBinding, emptyPast } from "./kv_cache.ts";
import { bool, float32, int32, int64, samplingFeeds, type SamplingParams } from "./feeds.ts";
import { createSession, type SessionOptions } from "./session.ts";
import { packRows } from "./pack.ts";

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
}

/** A sampled token per sequence. */
export interface StepOutput {
  tokens: number[];
  logprobs: number[];
}

export class InferenceEngine {
  readonly config: Qwen3Config;
  readonly lora: LoraShape | null;
  readonly #session: ort.InferenceSession;
  #loraFeeds: Record<string, ort.Tensor> = {};

  private constructor(config: Qwen3Config, lora: LoraShape | null, session: ort.InferenceSession) {
    this.config = config;
    this.lora = lora;
    this.#session = session;
  }

  /** Builds the graph for `model` with LoRA inputs of `lora` and opens its session. */
  static async create(
    model: ModelDir,
    lora: LoraShape | null,
    options: SessionOptions,
  ): Promise<InferenceEngine> {
    const built = buildInferenceModel(model, lora, options.ep);
    const session = await createSession(built.bytes, built.externalFolder, options);
    const engine = new InferenceEngine(model.config, lora, session);
    engine.setLoraWeights(null, 0);
    return engine;
  }

  /** Feeds an adapter of this engine's shape (`null`: zeros, i.e. the base model). */
  setLoraWeights(weights: LoraWeights | null, scale: number): void {
    if (!this.lora) return;
    const values = weights ?? zeroLoraWeights(this.config, this.lora);
    const feeds: Record<string, ort.Tensor> = { [LORA_SCALE_INPUT]: float32([scale], []) };
    for (const t of loraTensorSpecs(this.config, this.lora)) {
      const data = values.get(t.key);
      if (!data || data.length !== t.dims[0] * t.dims[1]) {
        throw new Error(
          `adapter tensor ${t.key}: expected ${t.dims[0]}×${t.dims[1]} floats, got ${data?.length}`,
        );
      }
      feeds[t.key] = new ort.Tensor("float32", data, t.dims); // wraps, no copy
    }
    this.#loraFeeds = feeds;
  }

  /**
   * Log-probs of each sequence's tokens: entry 0 NaN, entry t = log p(seq[t] | seq[<t]) under
   * softmax(logits / temperature). Sequences are packed into calls of at most `tokenBudget` padded
   * tokens (a longer sequence gets a call of its own).
   */
  async score(
    seqs: readonly (readonly number[])[],
    temperature: number,
    tokenBudget: number,
  ): Promise<Float32Array[]> {
    const out: Float32Array[] = new Array(seqs.length);
    for (const group of packRows(seqs.map((s) => s.length), tokenBudget)) {
      const rows = group.map((i) => seqs[i]);
      const lps = await this.#scoreCall(rows, temperature);
      group.forEach((i, j) => (out[i] = lps[j]));
    }
    return out;
  }

  async #scoreCall(rows: readonly (readonly number[])[], temperature: number): Promise<Float32Array[]> {
    const B = rows.length;
    const S = Math.max(...rows.map((r) => r.length));
    const ids = new Array<number>(B * S).fill(0);
    const targets = new Array<number>(B * S).fill(0);
    rows.forEach((r, b) =>
      r.forEach((t, i) => {
        ids[b * S + i] = t;
        if (i > 0) targets[b * S + i - 1] = t;
      })
    );
    const feeds = {
      ...this.#loraFeeds,
      ...emptyPast(this.config, B),
      ...samplingFeeds({ temperature, topK: 0, topP: 1 }, new Array(B).fill(0.5), this.config.vocab_size),
      [IO.ids]: int64(ids, [B, S]),
      [IO.seqlens]: int32(rows.map((r) => r.length - 1), [B]),
      [IO.total]: int32([S], []),
      [IO.scoreMode]: bool(true),
      [IO.targets]: int64(targets, [B, S]),
      [IO.sampleRows]: int64(rows.map((_, b) => b * S), [B]),
    };
    const result = await this.#session.run(feeds, [IO.targetLogprobs]);
    const flat = result[IO.targetLogprobs].data as Float32Array; // [B*S]
    return rows.map((r, b) => {
      const lp = new Float32Array(r.length);
      lp[0] = NaN;
      lp.set(flat.subarray(b * S, b * S + r.length - 1), 1);
      return lp;
    });
  }

  /** Runs one generation step (prefill, decode or continuation) and returns the sampled tokens. */
  async step(input: StepInput): Promise<StepOutput> {
    const { batch: B, width: S } = input;
    const total = Math.max(...Array.from(input.seqlens)) + 1;
    const feeds = {
      ...this.#loraFeeds,
      ...input.cache.feeds,
      ...samplingFeeds(input.sampling, input.uniforms, this.config.vocab_size),
      [IO.ids]: int64(input.ids, [B, S]),
      [IO.seqlens]: int32(input.seqlens, [B]),
      [IO.total]: int32([total], []),
      [IO.scoreMode]: bool(false),
      [IO.targets]: int64(new Array(B * S).fill(0), [B, S]),
      [IO.sampleRows]: int64(Array.from(input.sampleAt, (s, b) => b * S + s), [B]),
    };
    const fetches = { ...input.cache.fetches, [IO.nextTokens]: null, [IO.nextLogprobs]: null };
    const result = await this.#session.run(feeds, fetches as unknown as ort.InferenceSession.FetchesType);
    return {
      tokens: Array.from(result[IO.nextTokens].data as BigInt64Array, Number),
      logprobs: Array.from(result[IO.nextLogprobs].data as Float32Array),
    };
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}
