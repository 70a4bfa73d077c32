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
 * the captured graphs held anyway. A batch of a new size or capacity adds a cache, up to the limit below.
 *
 * A cache from the pool keeps what the last batch wrote: its positions past each sequence's length are
 * never read (the attention masks past `seqlens_k`, and a prefill writes from position 0), so a new batch
 * needs no clearing.
 *
 * Bounded: the pool makes at most `limit` caches (`POOLED_CACHES`) for batches of sizes and capacities it
 * has not seen; past that, a batch of a new shape gets a cache of its own whose bindings say `uncaptured`:
 * its decode steps run on the engine's main graph (not uncaptured in the capturing session, whose
 * uncaptured runs after a capture gave wrong log-probs: decode_session.ts `accepts`), and its release
 * frees it. A lasting cache (a policy's rollout scheduler, which keeps it for the policy's life and decodes
 * every rollout on it) is pooled whatever the count, so that rollouts are captured even after many other
 * batches.
 *
 * @module
 */

import type { BatchCache, CacheBinding } from "./kv_cache.ts";

/** Caches a pool makes for batches that are not lasting, at most (see the module comment). */
export const POOLED_CACHES = 8;

/** Caches by batch size and capacity, each either lent out or free. */
export class CachePool {
  readonly #free = new Map<string, BatchCache[]>();
  readonly #all: BatchCache[] = [];
  readonly #limit: number;
  /** Caches made for batches that were not lasting. */
  #transient = 0;

  constructor(limit = POOLED_CACHES) {
    this.#limit = limit;
  }

  /** Caches made so far (lent or free). */
  get size(): number {
    return this.#all.length;
  }

  /**
   * A cache for `batch` sequences of `capacity` positions: a free one of that size and capacity, else one
   * `make` makes. Its `release` gives it back to the pool; the pool's `release` frees them all. Past the
   * limit, unless `lasting`, one `make` makes that is not pooled: its bindings say `uncaptured`, and its
   * `release` frees it.
   */
  take(batch: number, capacity: number, make: () => BatchCache, lasting = false): BatchCache {
    const key = `${batch}x${capacity}`;
    const free = this.#free.get(key)?.pop();
    if (!free && !lasting) {
      if (this.#transient >= this.#limit) return uncaptured(make());
      this.#transient += 1;
    }
    const cache = free ?? this.#made(make());
    let lent = true;
    const range = (from: number, to: number): CacheBinding => {
      if (!lent) throw new Error("KV cache: used after release()");
      return cache.range(from, to);
    };
    return withRangeAndRelease(cache, range, () => {
      if (!lent) return;
      lent = false;
      const free = this.#free.get(key) ?? [];
      this.#free.set(key, free);
      free.push(cache);
    });
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

/**
 * `cache` with bindings that say `uncaptured`: one per binding the cache hands out, so one per row range
 * while the cache keeps its own, and a new one where the cache made a new one (a staged range's, when its
 * staging grew: device_cache.ts; the old one reads freed tensors).
 */
function uncaptured(cache: BatchCache): BatchCache {
  const marked = new WeakMap<CacheBinding, CacheBinding>();
  const range = (from: number, to: number): CacheBinding => {
    const own = cache.range(from, to);
    let binding = marked.get(own);
    if (!binding) marked.set(own, binding = { ...own, uncaptured: true });
    return binding;
  };
  return withRangeAndRelease(cache, range, () => cache.release());
}

/** `cache`'s size, capacity and bytes, with `range` and `release` of the caller's. */
function withRangeAndRelease(
  cache: BatchCache,
  range: BatchCache["range"],
  release: BatchCache["release"],
): BatchCache {
  return {
    batch: cache.batch,
    capacity: cache.capacity,
    get bytes() {
      return cache.bytes;
    },
    range,
    release,
  };
}
