/**
 * `CachePool`: device KV caches kept for the next batch of the same size and capacity, where an engine
 * runs its decode steps under graph capture (decode_session.ts).
 *
 * Why: a captured graph binds its cache's buffers until the engine closes (onnxruntime releases captured
 * graphs only with their session), so under capture a released cache's device memory cannot be freed, and
 * each new cache would add graphs of its own (one per decode width and attention span), captured again
 * on its first steps. Every `generate` or `startBatch` call makes a cache, so a process calling them in a
 * loop grew by a cache and its graphs per call. From the pool, a batch of a size and capacity seen before
 * gets a cache released before, with the same bindings (`BatchCache.range` hands out the same objects),
 * so its steps replay the graphs already captured and no memory is added. What the pool holds is what
 * the captured graphs held anyway. Batches of a new size or capacity still add a cache each.
 *
 * A cache from the pool keeps what the last batch wrote: its positions past each sequence's length are
 * never read (the attention masks past `seqlens_k`, and a prefill writes from position 0), so a new batch
 * needs no clearing.
 *
 * @module
 */

import type { BatchCache, CacheBinding } from "./kv_cache.ts";

/** Caches by batch size and capacity, each either lent out or free. */
export class CachePool {
  readonly #free = new Map<string, BatchCache[]>();
  readonly #all: BatchCache[] = [];

  /** Caches made so far (lent or free). */
  get size(): number {
    return this.#all.length;
  }

  /**
   * A cache for `batch` sequences of `capacity` positions: a free one of that size and capacity, else one
   * `make` makes. Its `release` gives it back to the pool; the pool's `release` frees them all.
   */
  take(batch: number, capacity: number, make: () => BatchCache): BatchCache {
    const key = `${batch}x${capacity}`;
    const cache = this.#free.get(key)?.pop() ?? this.#made(make());
    let lent = true;
    return {
      batch: cache.batch,
      capacity: cache.capacity,
      get bytes() {
        return cache.bytes;
      },
      range: (from: number, to: number): CacheBinding => {
        if (!lent) throw new Error("KV cache: used after release()");
        return cache.range(from, to);
      },
      release: () => {
        if (!lent) return;
        lent = false;
        const free = this.#free.get(key) ?? [];
        this.#free.set(key, free);
        free.push(cache);
      },
    };
  }

  /** Frees every cache made here, lent or free (after the sessions whose bindings hold them are closed). */
  release(): void {
    for (const cache of this.#all.splice(0)) cache.release();
    this.#free.clear();
  }

  #made(cache: BatchCache): BatchCache {
    this.#all.push(cache);
    return cache;
  }
}
