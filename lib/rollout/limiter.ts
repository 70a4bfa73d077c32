/**
 * An async counting semaphore: at most `limit` holders at once, waiters served first come first served.
 * The rollout shares one across all episodes to bound concurrent tool calls
 * (`rollout.tools.max_concurrency`).
 *
 * @module
 */

export class Limiter {
  readonly limit: number;
  #active = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`Limiter: limit must be an integer >= 1, got ${limit}`);
    }
    this.limit = limit;
  }

  /** Holders right now. */
  get active(): number {
    return this.#active;
  }

  /** Callers waiting for a slot right now. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /** Runs `body` once a slot is free and frees the slot when it settles. */
  async run<T>(body: () => Promise<T>): Promise<T> {
    await this.#acquire();
    try {
      return await body();
    } finally {
      this.#release();
    }
  }

  #acquire(): Promise<void> {
    if (this.#active < this.limit) {
      this.#active++;
      return Promise.resolve();
    }
    // The slot passes straight from the releaser to the waiter, so #active never dips in between.
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #release(): void {
    const next = this.#waiting.shift();
    if (next !== undefined) next();
    else this.#active--;
  }
}
