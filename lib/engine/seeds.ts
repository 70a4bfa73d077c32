/**
 * Sampling noise: one uniform per sampled token, a pure function of the sequence's seed and the
 * token's position in the sequence. A seed therefore reproduces its tokens whatever else is in the
 * batch, in whatever order turns and continuations happen, and across resumed runs.
 *
 * @module
 */

import { Rng } from "../model/prng.ts";

/** The uniform in (0, 1) that samples the token at `position` of a sequence seeded `seed`. */
export function samplingUniform(seed: number, position: number): number {
  const mixed = (Math.imul(seed >>> 0, 0x9e3779b1) ^ Math.imul(position + 1, 0x85ebca6b)) >>> 0;
  return new Rng(mixed).uniform();
}
