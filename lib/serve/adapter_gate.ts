/**
 * `AdapterGate`: requests for several adapters on an engine that applies one adapter at a time.
 *
 * Requests for the adapter in use run at once and share the engine's continuous batching. A request
 * for another adapter waits; from then on new requests queue behind it (no starvation). When the last
 * running request ends, the gate switches to the adapter of the oldest waiting request
 * (`setAdapter`, which needs no open sequence) and lets every waiting request for it run together.
 * Serving two adapters therefore alternates between batches of each; a vLLM-like server that mixes
 * adapters within one batch (multi-LoRA kernels) is out of scope here.
 *
 * @module
 */

import type { Adapter } from "../model/lora.ts";
import type { Policy } from "../engine/policy.ts";
import { HttpError } from "./limits.ts";

interface Waiter {
  name: string | null;
  resolve(): void;
  reject(e: unknown): void;
}

export class AdapterGate {
  readonly #policy: Policy;
  /** Adapter tensors by name, looked up at switch time (an unloaded name fails its waiters). */
  readonly #lookup: (name: string) => Adapter | undefined;
  #current: string | null = null;
  #active = 0;
  #switching = false;
  readonly #queue: Waiter[] = [];

  constructor(policy: Policy, lookup: (name: string) => Adapter | undefined) {
    this.#policy = policy;
    this.#lookup = lookup;
  }

  /** The adapter applied now (null: the base model). */
  get current(): string | null {
    return this.#current;
  }

  /** Runs `fn` while adapter `name` (null: base) is applied. */
  async run<T>(name: string | null, fn: () => Promise<T>): Promise<T> {
    await this.#enter(name);
    try {
      return await fn();
    } finally {
      this.#active -= 1;
      this.#pump();
    }
  }

  #enter(name: string | null): Promise<void> {
    if (!this.#switching && this.#queue.length === 0 && name === this.#current) {
      this.#active += 1;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      this.#queue.push({ name, resolve, reject });
      this.#pump();
    });
  }

  /** Switches to the oldest waiter's adapter once idle, then admits every waiter for it. */
  #pump(): void {
    if (this.#switching || this.#active > 0 || this.#queue.length === 0) return;
    const next = this.#queue[0].name;
    if (next === this.#current) return this.#admit(next);
    this.#switching = true;
    this.#apply(next).then(
      () => {
        this.#current = next;
        this.#switching = false;
        this.#admit(next);
      },
      (error) => {
        this.#switching = false;
        this.#take(next).forEach((w) => w.reject(error));
        this.#pump();
      },
    );
  }

  async #apply(name: string | null): Promise<void> {
    if (name === null) return await this.#policy.setAdapter(null);
    const adapter = this.#lookup(name);
    if (!adapter) {
      throw new HttpError(404, `The model \`${name}\` does not exist (it was unloaded).`, "NotFoundError");
    }
    await this.#policy.setAdapter(adapter);
  }

  #admit(name: string | null): void {
    const ready = this.#take(name);
    this.#active += ready.length;
    ready.forEach((w) => w.resolve());
  }

  /** Removes and returns the waiters for `name`. */
  #take(name: string | null): Waiter[] {
    const taken = this.#queue.filter((w) => w.name === name);
    const rest = this.#queue.filter((w) => w.name !== name);
    this.#queue.splice(0, this.#queue.length, ...rest);
    return taken;
  }
}
