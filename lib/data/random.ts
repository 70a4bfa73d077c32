/**
 * The deterministic PRNG used for dataset shuffles and synthetic tasks: mulberry32 (32-bit state,
 * period 2^32, Tommy Ettinger's public-domain generator). Tiny, fast, identical on every platform,
 * and good enough for shuffling and sampling; it is not for cryptography.
 */

/** A source of uniform floats in [0, 1). */
export type Rng = () => number;

/**
 * A mulberry32 generator for `seed`. Any finite number is accepted: it is truncated to an integer and
 * its low and high 32-bit halves are XORed into the 32-bit state, so seeds above 2^32 still differ.
 */
export function mulberry32(seed: number): Rng {
  const whole = Math.trunc(seed);
  let state = (whole ^ Math.floor(whole / 2 ** 32)) >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
}

/** A uniform integer in [lo, hi] (both inclusive). */
export function randomInt(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/** A uniform pick from a non-empty list. */
export function pick<T>(rng: Rng, items: readonly T[]): T {
  return items[Math.floor(rng() * items.length)];
}

/** A new array with `items` in a Fisher–Yates order drawn from mulberry32(`seed`). */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = items.slice();
  const rng = mulberry32(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
