/**
 * Yielding to the event loop between decode steps, so that tool calls, timers and Worker messages run.
 *
 * `setTimeout(0)` is clamped (about 2 ms per call measured under Deno 2.9 on a busy 2-core VM, more than
 * a tiny model's decode step); a message posted to a MessageChannel is a macrotask with no clamp (about
 * 5 µs on a channel kept open). A loop keeps its channel open while it runs (`EventLoopYields`) and
 * closes it when it ends, so that it never keeps a finished process alive.
 *
 * Nor do channel yields let the network in promptly: a loopback `fetch` needed 86 of them to complete
 * (measured under Deno 2.9; one with `setTimeout(0)` yields). A loop on the HTTP thread therefore admits a
 * request still being read mostly once its batch drains; `deno task serve` runs the engine in a Worker
 * (docs/serving.md, "Where the engine runs"). And a channel yield does not wait for every microtask
 * queued before it is delivered (observed under Deno 2.9: a caller's `await` of a settled promise, queued
 * while the loop's yield was pending, resumed after the loop's next iteration), so scheduler.ts `#loop` must
 * not rely on a request made "at once" reaching it before that iteration.
 *
 * But inside a Worker whose loop alternates blocking onnxruntime calls with channel yields, messages from
 * the parent thread are not delivered (measured under Deno 2.9: a loop of 2 ms blocking steps and channel
 * yields received 1 of 20 parent messages in 200 ms; with `setTimeout(0)` yields, all 20). So a Worker
 * registers a probe (`watchParentMessages`) telling whether the parent has posted messages not yet
 * received, and the yield is a timer exactly then: new turn requests join the batch at the next step, and
 * the common case keeps the cheap yield.
 *
 * @module
 */

let parentMessagesPending: (() => boolean) | null = null;

/** Registers the probe of messages posted by the parent thread and not yet received (Workers only). */
export function watchParentMessages(probe: () => boolean): void {
  parentMessagesPending = probe;
}

/**
 * The yields of one loop (a scheduler's, between its decode steps), over one channel kept open from the
 * first yield until `close()`. Opening a channel costs more than the yield itself: one per yield (closed
 * when none was pending, so that it never kept a finished process alive) took about 150 µs of each tiny
 * model decode step on the CPU, against ~5 µs for a yield on a channel kept open (measured under Deno 2.9
 * on the 2-core VM). `unref()` on both ports does not let the process exit under Deno 2.9, so the owner
 * must close it: the loop does, in its `finally`.
 */
export class EventLoopYields {
  #channel: MessageChannel | null = null;
  readonly #waiting: Array<() => void> = [];
  #closing = false;

  /** Resolves after the event loop has run the macrotasks queued before this call. */
  next(): Promise<void> {
    if (parentMessagesPending?.()) return new Promise<void>((resolve) => setTimeout(resolve, 0));
    return new Promise<void>((resolve) => {
      this.#waiting.push(resolve);
      this.#open().port2.postMessage(0);
    });
  }

  /** Closes the channel now, or when the yields still pending have resolved; a later `next` opens another. */
  close(): void {
    this.#closing = true;
    if (this.#waiting.length === 0) this.#shut();
  }

  #open(): MessageChannel {
    this.#closing = false;
    if (this.#channel) return this.#channel;
    const channel = new MessageChannel();
    channel.port1.onmessage = () => {
      this.#waiting.shift()?.();
      if (this.#closing && this.#waiting.length === 0) this.#shut();
    };
    return this.#channel = channel;
  }

  #shut(): void {
    this.#channel?.port1.close();
    this.#channel = null;
    this.#closing = false;
  }
}
