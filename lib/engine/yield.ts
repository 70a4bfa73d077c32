/**
 * Yielding to the event loop between decode steps, so that tool calls, timers and Worker messages run.
 *
 * `setTimeout(0)` is clamped (about 2 ms per call measured under Deno 2.9 on a busy 2-core VM, more than
 * a tiny model's decode step); a message posted to a MessageChannel is a macrotask with no clamp (about
 * 8 µs). The channel is opened on first use and closed when no yield is pending, so that it never keeps
 * a finished process alive.
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

let channel: MessageChannel | null = null;
const waiting: Array<() => void> = [];
let parentMessagesPending: (() => boolean) | null = null;

/** Registers the probe of messages posted by the parent thread and not yet received (Workers only). */
export function watchParentMessages(probe: () => boolean): void {
  parentMessagesPending = probe;
}

/** Resolves after the event loop has run the macrotasks queued before this call. */
export function yieldToEventLoop(): Promise<void> {
  if (parentMessagesPending?.()) return new Promise<void>((resolve) => setTimeout(resolve, 0));
  return new Promise<void>((resolve) => {
    waiting.push(resolve);
    if (!channel) {
      channel = new MessageChannel();
      channel.port1.onmessage = release;
    }
    channel.port2.postMessage(0);
  });
}

function release(): void {
  waiting.shift()?.();
  if (waiting.length === 0 && channel) {
    channel.port1.close();
    channel = null;
  }
}
