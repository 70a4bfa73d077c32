/**
 * Yielding to the event loop between decode steps, so that tool calls, timers and Worker messages run.
 *
 * `setTimeout(0)` is clamped (about 2 ms per call measured under Deno 2.9 on a busy 2-core VM, more than
 * a tiny model's decode step); a message posted to a MessageChannel is a macrotask with no clamp (about
 * 8 µs). The channel is opened on first use and closed when no yield is pending, so that it never keeps
 * a finished process alive.
 *
 * @module
 */

let channel: MessageChannel | null = null;
const waiting: Array<() => void> = [];

/** Resolves after the event loop has run the macrotasks queued before this call. */
export function yieldToEventLoop(): Promise<void> {
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
