/**
 * The KV cache of a generation batch: per layer, one key and one value buffer `[B, nKV, M, D]` in JS
 * memory, passed (wrapped, never copied) as both the past input and the present output of
 * GroupQueryAttention, which writes the new positions in place. A single sequence's rows are exposed as
 * a `[1, nKV, M, D]` view of the same memory, for batch-1 continuations.
 *
 * A binding (`whole()`, `row(i)`) is created once and then returned again, so the engine can keep its
 * session handles on those views for the life of the batch.
 *
 * Dimension legend: L layers, B sequences, nKV key/value heads, M positions, D head dim.
 *
 * @module
 */

import type { HostTensor } from "../ort/value.ts";
import type { DeviceTensor } from "../ort/device.ts";
import type { Qwen3Config } from "../model/hf_config.ts";
import { IO } from "./infer_graph.ts";

/** A cache buffer: host memory (this file) or device memory (device_cache.ts). */
export type CacheTensor = HostTensor<"float32"> | DeviceTensor;

/** One layer's key and value buffers (or one sequence's view of them). */
export interface CacheLayer {
  key: CacheTensor; // [B, nKV, M, D]
  value: CacheTensor; // [B, nKV, M, D]
}

/** A cache (or one sequence's view of it) to bind to the graph as past inputs and present outputs. */
export interface CacheBinding {
  layers: readonly CacheLayer[];
  /**
   * Set where the layers are a staging copy of rows that cannot be viewed in place (device rows after
   * the first, device_cache.ts): `before` copies the rows in before the run, `after` copies them back.
   */
  stage?: { before(): void; after(): void };
  /**
   * Set where decode steps on these rows must not be captured: a cache that is freed when released
   * (cache_pool.ts), which a captured graph would keep. Its steps run on the engine's main graph.
   */
  uncaptured?: boolean;
}

/** The KV cache of a batch of sequences, in host memory (`KvCache`) or device memory (`DeviceKvCache`). */
export interface BatchCache {
  readonly batch: number;
  /** Positions per sequence (M). */
  readonly capacity: number;
  /** Bytes held by the cache. */
  readonly bytes: number;
  /** Sequences `[from, to)`, `[to - from, nKV, M, D]` per layer, bound to the same memory each time. */
  range(from: number, to: number): CacheBinding;
  /** Frees device memory now (host memory goes with the garbage collector). */
  release(): void;
}

export class KvCache implements BatchCache {
  readonly batch: number;
  /** Positions per sequence (M). */
  readonly capacity: number;
  readonly #keys: Float32Array[] = []; // L × [B, nKV, M, D]
  readonly #values: Float32Array[] = []; // L × [B, nKV, M, D]
  readonly #dims: [number, number, number];
  /** Bindings handed out, by row range, so each is bound to the session once. */
  readonly #ranges = new Map<number, CacheBinding>();

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
    return this.range(0, this.batch);
  }

  /** Sequence `row` alone, `[1, nKV, M, D]` per layer, sharing memory with `whole()`. */
  row(row: number): CacheBinding {
    return this.range(row, row + 1);
  }

  /**
   * Sequences `[from, to)`, `[to - from, nKV, M, D]` per layer: a contiguous view of the same memory, since
   * the batch is the outermost dimension.
   */
  range(from: number, to: number): CacheBinding {
    const key = rangeKey(from, to, this.batch);
    let binding = this.#ranges.get(key);
    if (!binding) {
      const size = this.#dims[0] * this.#dims[1] * this.#dims[2];
      binding = this.#bind((data) => data.subarray(from * size, to * size), to - from);
      this.#ranges.set(key, binding);
    }
    return binding;
  }

  release(): void {}

  #bind(view: (data: Float32Array) => Float32Array, batch: number): CacheBinding {
    const dims = [batch, ...this.#dims];
    const layers = this.#keys.map((data, l) => ({
      key: { type: "float32", data: view(data), dims }, // [B, nKV, M, D]
      value: { type: "float32", data: view(this.#values[l]), dims }, // [B, nKV, M, D]
    } as const));
    return { layers };
  }
}

/** An empty cache `[B, nKV, 0, D]` per layer, for scoring calls, which need no cache. */
export function emptyCache(cfg: Qwen3Config, batch: number): CacheBinding {
  const empty: HostTensor<"float32"> = {
    type: "float32",
    data: new Float32Array(0),
    dims: [batch, cfg.num_key_value_heads, 0, cfg.head_dim],
  };
  return { layers: Array.from({ length: cfg.num_hidden_layers }, () => ({ key: empty, value: empty })) };
}

/** The graph's past inputs and present outputs of a cache, by graph name. */
export interface CacheIO<T> {
  past: Record<string, T>;
  present: Record<string, T>;
}

/**
 * Names a cache's buffers as the graph's past inputs and present outputs: `wrap` turns each buffer into
 * what the session takes (called once per buffer, and the result serves as both past and present).
 */
export function cacheIO<T>(cache: CacheBinding, wrap: (t: CacheTensor) => T): CacheIO<T> {
  const io: CacheIO<T> = { past: {}, present: {} };
  cache.layers.forEach((layer, l) => {
    const [key, value] = [wrap(layer.key), wrap(layer.value)];
    [io.past[IO.pastKey(l)], io.past[IO.pastValue(l)]] = [key, value];
    [io.present[IO.presentKey(l)], io.present[IO.presentValue(l)]] = [key, value];
  });
  return io;
}

/** A key for rows `[from, to)` of a cache of `batch` rows, one per range; throws for rows outside it. */
export function rangeKey(from: number, to: number, batch: number): number {
  if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from < to && to <= batch)) {
    throw new RangeError(`kv cache: rows [${from}, ${to}) outside a batch of ${batch}`);
  }
  return from * (batch + 1) + to;
}
