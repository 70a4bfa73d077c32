/**
 * The KV cache of a generation batch: per layer, one key and one value buffer `[B, nKV, M, D]` in JS
 * memory, wrapped (not copied) as onnxruntime tensors and passed as both the past input and the
 * present output of GroupQueryAttention, which writes the new positions in place. A single sequence's
 * rows are exposed as a `[1, nKV, M, D]` view of the same memory, for batch-1 continuations.
 *
 * Dimension legend: L layers, B sequences, nKV key/value heads, M positions, D head dim.
 *
 * @module
 */

import * as ort from "onnxruntime-node";
import type { Qwen3Config } from "../model/hf_config.ts";
import { IO } from "./infer_graph.ts";

/** Feeds and fetches that bind a cache (or one sequence's view of it) to the graph. */
export interface CacheBinding {
  feeds: Record<string, ort.Tensor>;
  fetches: Record<string, ort.Tensor>;
}

export class KvCache {
  readonly batch: number;
  /** Positions per sequence (M). */
  readonly capacity: number;
  readonly #keys: Float32Array[] = []; // L × [B, nKV, M, D]
  readonly #values: Float32Array[] = []; // L × [B, nKV, M, D]
  readonly #dims: [number, number, number];
  #whole: CacheBinding | undefined;
  readonly #rows = new Map<number, CacheBinding>();

  constructor(cfg: Qwen3Config, batch: number, capacity: number) {
    this.batch = batch;
    this.capacity = capacity;
    this.#dims = [cfg.num_key_value_heads, capacity, cfg.head_dim];
    const perLayer = batch * cfg.num_key_value_heads * capacity * cfg.head_dim;
    for (let l = 0; l < cfg.num_hidden_layers; l++) {
      this.#keys.push(new Float32Array(perLayer));
      this.#values.push(new Float32Array(perLayer));
    }
  }

  /** Bytes held by the cache. */
  get bytes(): number {
    return this.#keys.reduce((sum, k) => sum + 2 * k.byteLength, 0);
  }

  /** The whole batch, `[B, nKV, M, D]` per layer. */
  whole(): CacheBinding {
    this.#whole ??= this.#bind((data) => data, this.batch);
    return this.#whole;
  }

  /** Sequence `row` alone, `[1, nKV, M, D]` per layer, sharing memory with `whole()`. */
  row(row: number): CacheBinding {
    let binding = this.#rows.get(row);
    if (!binding) {
      const size = this.#dims[0] * this.#dims[1] * this.#dims[2];
      binding = this.#bind((data) => data.subarray(row * size, (row + 1) * size), 1);
      this.#rows.set(row, binding);
    }
    return binding;
  }

  #bind(view: (data: Float32Array) => Float32Array, batch: number): CacheBinding {
    const feeds: Record<string, ort.Tensor> = {};
    const fetches: Record<string, ort.Tensor> = {};
    const dims = [batch, ...this.#dims];
    this.#keys.forEach((data, l) => {
      const key = new ort.Tensor("float32", view(data), dims);
      const value = new ort.Tensor("float32", view(this.#values[l]), dims);
      feeds[IO.pastKey(l)] = key;
      feeds[IO.pastValue(l)] = value;
      fetches[IO.presentKey(l)] = key;
      fetches[IO.presentValue(l)] = value;
    });
    return { feeds, fetches };
  }
}

/** Empty past tensors `[B, nKV, 0, D]` for scoring calls, which need no cache. */
export function emptyPast(cfg: Qwen3Config, batch: number): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  const empty = new ort.Tensor("float32", new Float32Array(0), [
    batch,
    cfg.num_key_value_heads,
    0,
    cfg.head_dim,
  ]);
  for (let l = 0; l < cfg.num_hidden_layers; l++) {
    feeds[IO.pastKey(l)] = empty;
    feeds[IO.pastValue(l)] = empty;
  }
  return feeds;
}
