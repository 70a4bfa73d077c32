/**
 * `GenerationBatch`: a fixed set of sequences generated turn by turn (`startBatch`), on the same
 * continuous-batching scheduler as episodes opened one by one (scheduler.ts).
 *
 * Each sequence holds one slot of the batch's own scheduler for the life of the batch. A turn over
 * several sequences is one request per sequence, made together: a fresh batch is prefilled in one call,
 * then all decode together, each stopping on its own. Continuing after a tool call costs the tool
 * result's tokens only: the prefix stays cached.
 *
 * @module
 */

import type { InferenceEngine } from "./engine.ts";
import { type BatchStats, type GenerateOptions, type Generation, TurnScheduler } from "./scheduler.ts";

export type { BatchStats, GenerateOptions, Generation, TokenEvent } from "./scheduler.ts";

export class GenerationBatch {
  readonly #scheduler: TurnScheduler;
  readonly #opened: Promise<void>;
  /** Most tokens a sequence may hold. */
  readonly capacity: number;

  constructor(
    engine: InferenceEngine,
    prompts: readonly (readonly number[])[],
    capacity: number,
    seeds: readonly number[],
  ) {
    if (prompts.length === 0) throw new RangeError("generate: no prompts; pass at least one");
    prompts.forEach((p, i) => {
      if (p.length === 0) throw new RangeError(`generate: prompt ${i} is empty; give at least one token`);
      if (p.length >= capacity) {
        throw new RangeError(
          `generate: prompt ${i} has ${p.length} tokens, capacity is ${capacity}; raise the capacity`,
        );
      }
    });
    this.capacity = capacity;
    this.#scheduler = new TurnScheduler(engine, prompts.length, capacity);
    // Every slot is free, so each open takes its slot at once, in order: sequence i holds slot i.
    this.#opened = Promise.all(prompts.map((p, i) => this.#scheduler.openSequence(p, seeds[i] ?? i)))
      .then(() => {});
  }

  get size(): number {
    return this.#scheduler.slots;
  }

  /** Frees the batch's KV cache (device memory at once); the batch is unusable after. */
  release(): void {
    this.#scheduler.release();
  }

  get stats(): BatchStats {
    return this.#scheduler.stats;
  }

  /** All tokens of sequence `i` so far. */
  tokens(i: number): number[] {
    return this.#scheduler.tokens(this.#check(i));
  }

  /** Appends environment tokens (a tool result, a user turn) to sequence `i`. */
  append(i: number, tokens: readonly number[]): void {
    this.#scheduler.append(this.#check(i), tokens);
  }

  /** Samples a turn for sequences `which` (default all). */
  async generate(options: GenerateOptions, which?: readonly number[]): Promise<Generation[]> {
    await this.#opened;
    const rows = which ? [...which] : Array.from({ length: this.size }, (_, i) => i);
    rows.forEach((i) => this.#check(i));
    return await Promise.all(rows.map((i) => this.#scheduler.generate(i, options)));
  }

  #check(i: number): number {
    if (!Number.isInteger(i) || i < 0 || i >= this.#scheduler.slots) {
      throw new RangeError(`generate: no sequence ${i} in a batch of ${this.#scheduler.slots}`);
    }
    return i;
  }
}
