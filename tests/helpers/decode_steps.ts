/**
 * Waiting on a policy's work counters instead of the clock: `decodeStepsReached` polls
 * `sequenceStats()` until the continuous-batching scheduler has run a given number of decode steps.
 *
 * @module
 */

import type { Policy } from "../../lib/engine/policy.ts";

/** Resolves with the step count once `decodeSteps` reaches `steps`; fails after 60 s (a hung engine). */
export async function decodeStepsReached(policy: Policy, steps: number): Promise<number> {
  for (let i = 0; i < 12_000; i++) {
    const now = (await policy.sequenceStats()).decodeSteps;
    if (now >= steps) return now;
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`no decode step ${steps} after 60 s`);
}

/** Whether `e` is a cancellation (an AbortError from a signal, ours or fetch's). */
export const isAbort = (e: unknown): boolean => e instanceof Error && e.name === "AbortError";
