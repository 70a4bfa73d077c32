/**
 * Episode seeds derived from counters — the run seed, the step, the task and the sample index — so that
 * a rerun (or a resumed run) samples every token again exactly, whatever the batching.
 *
 * @module
 */

/** A 32-bit seed for one episode (FNV-1a over the task id, mixed with the counters). */
export function episodeSeed(runSeed: number, step: number, taskId: string, sampleIdx: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < taskId.length; i++) h = Math.imul(h ^ taskId.charCodeAt(i), 0x01000193);
  for (const n of [runSeed, step, sampleIdx]) {
    h = Math.imul(h ^ (n >>> 0), 0x9e3779b1);
    h ^= h >>> 15;
  }
  return h >>> 0;
}
