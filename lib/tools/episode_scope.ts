/**
 * What a tool keeps for one episode and gives back when the episode ends: an MCP server started with
 * `per_episode: true` is the example. The tool environment makes one scope per episode, hands it to every
 * call (`ToolContext.episode`) and closes it when the episode ends, however it ends; the rollout's
 * dispatch makes one per turn when it is called without one (tests, custom code), so nothing outlives
 * the calls that made it.
 *
 * @module
 */

interface Held {
  value: Promise<unknown>;
  close(value: unknown): Promise<void>;
}

export class EpisodeScope {
  readonly #held = new Map<unknown, Held>();
  #closed = false;

  /**
   * The episode's value for `key`: made by `open` on first use (concurrent first uses share one `open`),
   * given to `close` when the scope closes. A value that failed to open is not kept: the next use tries
   * again (and the failure goes to the caller that asked).
   */
  resource<T>(key: unknown, open: () => Promise<T>, close: (value: T) => Promise<void>): Promise<T> {
    if (this.#closed) return Promise.reject(new Error("the episode has ended; its tools are closed"));
    const held = this.#held.get(key);
    if (held !== undefined) return held.value as Promise<T>;
    const value = open();
    this.#held.set(key, { value, close: (v) => close(v as T) });
    value.catch(() => this.#held.get(key)?.value === value && this.#held.delete(key));
    return value;
  }

  /** Whether `key` has a value (opened or opening). */
  has(key: unknown): boolean {
    return this.#held.has(key);
  }

  /** Closes every value, waiting for those still opening; errors of `close` are the closer's to report. */
  async close(): Promise<void> {
    this.#closed = true;
    const held = [...this.#held.values()];
    this.#held.clear();
    await Promise.allSettled(held.map(async (h) => h.close(await h.value)));
  }
}
