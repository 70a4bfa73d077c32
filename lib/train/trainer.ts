/**
 * `Trainer`: the train graph's session. One call per micro-batch gives the LoRA gradients of that
 * micro-batch's share of the loss, the loss, and per-row log-probs and loss parts.
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import type { ModelDir } from "../model/model_dir.ts";
import { headChunkRows } from "../model/graph/head.ts";
import { LORA_SCALE_INPUT } from "../model/graph/lora_inputs.ts";
import { loraScale, type LoraSpec, loraTensorSpecs, type LoraWeights } from "../model/lora.ts";
import { createSession, type SessionOptions } from "../engine/session.ts";
import type { MicroBatch } from "./batch.ts";
import { buildTrainModel, TRAIN_IO, type TrainGraphSpec } from "./train_graph.ts";

/** The run's scalars. */
export interface LossScalars {
  temperature: number;
  epsLow: number;
  epsHigh: number;
  beta: number;
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
}

export class Trainer {
  readonly model: ModelDir;
  readonly spec: TrainGraphSpec & { lora: LoraSpec };
  /** Rows of logits the head computes at once, at most. */
  readonly maxChunk: number;
  readonly #session: ort.InferenceSession;

  private constructor(
    model: ModelDir,
    spec: TrainGraphSpec & { lora: LoraSpec },
    session: ort.InferenceSession,
  ) {
    this.model = model;
    this.spec = spec;
    this.#session = session;
    this.maxChunk = headChunkRows(model.config.vocab_size);
  }

  /** Train graphs built and sessions opened in this process (a run should build one: tests count). */
  static created = 0;

  /** Builds the train graph for `spec` and opens its session (seconds for a large model). */
  static async create(
    model: ModelDir,
    spec: TrainGraphSpec & { lora: LoraSpec },
    options: SessionOptions = {},
  ): Promise<Trainer> {
    const built = buildTrainModel(model, spec);
    const session = await createSession(built.bytes, built.externalFolder, { ...options, ep: spec.ep });
    Trainer.created++;
    return new Trainer(model, spec, session);
  }

  /** Forward and backward over one micro-batch with LoRA `params` (scaled by `scale`, default the spec's). */
  async run(
    mb: MicroBatch,
    params: LoraWeights,
    s: LossScalars,
    scale = loraScale(this.spec.lora),
  ): Promise<MicroResult> {
    const dims = [mb.rows, mb.width];
    const head = [mb.headRows.length];
    const f32 = (data: Float32Array) => new ort.Tensor("float32", data, head);
    const i64 = (data: BigInt64Array, shape = dims) => new ort.Tensor("int64", data, shape);
    const scalar = (v: number) => new ort.Tensor("float32", Float32Array.from([v]), []);
    const feeds: Record<string, ort.Tensor> = {
      [TRAIN_IO.ids]: i64(mb.ids),
      [TRAIN_IO.positions]: i64(mb.positions),
      [TRAIN_IO.headRows]: i64(mb.headRows, head),
      [TRAIN_IO.targets]: i64(mb.targets, head),
      [TRAIN_IO.weights]: f32(mb.weights),
      [TRAIN_IO.old]: f32(mb.old),
      [TRAIN_IO.advantages]: f32(mb.advantages),
      [TRAIN_IO.temperature]: scalar(s.temperature),
      [TRAIN_IO.epsLow]: scalar(s.epsLow),
      [TRAIN_IO.epsHigh]: scalar(s.epsHigh),
      [TRAIN_IO.beta]: scalar(s.beta),
      [TRAIN_IO.chunk]: new ort.Tensor("int64", BigInt64Array.from([BigInt(mb.chunk)]), []),
      [LORA_SCALE_INPUT]: scalar(scale),
    };
    if (this.spec.withReference) feeds[TRAIN_IO.ref] = f32(mb.ref ?? new Float32Array(mb.headRows.length));
    const keys = loraTensorSpecs(this.model.config, this.spec.lora);
    for (const t of keys) feeds[t.key] = new ort.Tensor("float32", params.get(t.key)!, t.dims);
    const out = await this.#session.run(feeds);
    const data = (name: string) => out[name].data as Float32Array;
    return {
      loss: data(TRAIN_IO.loss)[0],
      grads: new Map(keys.map((t) => [t.key, data(TRAIN_IO.grad(t.key))])),
      logprobs: data(TRAIN_IO.logprobs),
      pg: data(TRAIN_IO.pg),
      kl: data(TRAIN_IO.kl),
      clipped: data(TRAIN_IO.clipped),
      entropy: data(TRAIN_IO.entropy),
    };
  }

  async close(): Promise<void> {
    await this.#session.release();
  }
}
