/**
 * `CachePool` (lib/engine/cache_pool.ts) on stand-in caches: a released cache is lent again for its size and
 * capacity only, with the same bindings; a cache lent twice at once is two caches; a cache given back is
 * unusable to the one who gave it; the pool's release frees every cache it made, once; past its limit a
 * batch of a new shape gets an unpooled cache whose bindings say uncaptured, unless lasting. The pool on
 * WebGPU under graph capture: tests/engine/decode_session_test.ts.
 */

import assert from "node:assert/strict";
import { CachePool } from "../../lib/engine/cache_pool.ts";
import type { BatchCache, CacheBinding } from "../../lib/engine/kv_cache.ts";

/**
 * A cache that counts its releases and hands out one binding object per row range, until `remake` (as a
 * device cache makes new bindings for staged rows when its staging grows).
 */
function standIn(batch: number, capacity: number) {
  const bindings = new Map<string, CacheBinding>();
  const cache = {
    batch,
    capacity,
    bytes: batch * capacity,
    releases: 0,
    remake: () => bindings.clear(),
    range(from: number, to: number): CacheBinding {
      const key = `${from}:${to}`;
      if (!bindings.has(key)) bindings.set(key, { layers: [] });
      return bindings.get(key)!;
    },
    release() {
      cache.releases += 1;
    },
  };
  return cache satisfies BatchCache;
}

Deno.test("a cache pool lends a released cache again for its size and capacity, with the same bindings", () => {
  const pool = new CachePool();
  const made: ReturnType<typeof standIn>[] = [];
  const take = (batch: number, capacity: number) =>
    pool.take(batch, capacity, () => {
      const c = standIn(batch, capacity);
      made.push(c);
      return c;
    });

  const first = take(8, 100);
  const binding = first.range(0, 8);
  const beside = take(8, 100); // lent at once: a second cache
  assert.equal(made.length, 2);
  assert.notEqual(beside.range(0, 8), binding);
  first.release();
  first.release(); // a second release gives nothing back twice
  assert.throws(() => first.range(0, 8), /used after release/);

  const again = take(8, 100);
  assert.equal(made.length, 2, "the released cache is lent again");
  assert.equal(again.range(0, 8), binding, "with the binding its graphs were captured on");
  assert.equal(take(8, 101).capacity, 101, "another capacity: a cache of its own");
  assert.equal(take(4, 100).batch, 4, "another size: a cache of its own");
  assert.equal(made.length, 4);
  assert.equal(take(8, 100) === again, false);
  assert.equal(made.length, 5, "the one free cache was lent already: a new one");
  assert.equal(pool.size, 5);

  pool.release();
  assert.deepEqual(made.map((c) => c.releases), [1, 1, 1, 1, 1], "each cache freed once, lent or not");
  assert.equal(pool.size, 0);
});

Deno.test("past its limit a cache pool lends caches of their own, uncaptured and freed on release, except lasting ones", () => {
  const pool = new CachePool(2);
  const made: ReturnType<typeof standIn>[] = [];
  const take = (capacity: number, lasting = false) =>
    pool.take(1, capacity, () => {
      const c = standIn(1, capacity);
      made.push(c);
      return c;
    }, lasting);

  const [a, b] = [take(10), take(11)];
  assert.equal(a.range(0, 1).uncaptured, undefined, "within the limit: pooled, captured");
  const over = take(12);
  const binding = over.range(0, 1);
  assert.equal(binding.uncaptured, true, "past the limit: uncaptured");
  assert.equal(over.range(0, 1), binding, "one binding object per row range");
  made[2].remake();
  const remade = over.range(0, 1);
  assert.notEqual(remade, binding, "a binding the cache made anew is marked anew, not the old one kept");
  assert.equal(remade.layers, made[2].range(0, 1).layers, "with the cache's new binding's tensors");
  assert.equal(remade.uncaptured, true);
  over.release();
  assert.equal(made[2].releases, 1, "freed on release, not kept");
  const lasting = take(13, true);
  assert.equal(lasting.range(0, 1).uncaptured, undefined, "a lasting cache is pooled past the limit");
  a.release();
  assert.equal(take(10).range(0, 1).uncaptured, undefined, "a shape seen before: its pooled cache again");
  assert.equal(made.length, 4);
  b.release();
  pool.release();
  assert.deepEqual(
    made.map((c) => c.releases),
    [1, 1, 1, 1],
    "the unpooled cache was freed once, by its release",
  );
});
