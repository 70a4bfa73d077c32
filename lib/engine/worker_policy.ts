/**
 * `loadPolicy`: a `Policy` whose onnxruntime sessions run in a Worker (worker.ts), so the calling
 * thread keeps moving while the model computes. Requests are queued in order by the worker.
 *
 * ```ts
 * import { loadPolicy } from "./worker_policy.ts";
 * const policy = await loadPolicy("runs/demo/model");
 * const [g] = await policy.generate([[151644, 872, 198]], { maxNewTokens: 16, temperature: 0.7 });
 * const lp = await policy.logprobs([[151644, 872, 198, ...g.tokens]]);
 * await policy.close();
 * ```
 *
 * @module
 */

import type { Qwen3Config } from "../model/hf_config.ts";
import type { Adapter } from "../model/lora.ts";
import type { GenerateOptions, Generation } from "./generate.ts";
import { LocalPolicy } from "./local_policy.ts";
import type {
  BatchOptions,
  BatchStats,
  GenerationSession,
  LogprobOptions,
  Policy,
  PolicyOptions,
  PolicySequence,
  ScoredWithAlternatives,
  SequenceOptions,
  TokenEvent,
} from "./policy.ts";
import { abortError } from "./abort.ts";
import { deserializeError, type SerializedError } from "./worker_errors.ts";

/** Options of `loadPolicy` beyond the engine's. */
export interface LoadPolicyOptions extends PolicyOptions {
  /** Run onnxruntime in a Worker (default true); false runs it on this thread. */
  worker?: boolean;
}

/** Loads a Qwen3 policy from a Hugging Face model directory. */
export async function loadPolicy(modelDir: string, options: LoadPolicyOptions = {}): Promise<Policy> {
  const { worker = true, ...engineOptions } = options;
  if (!worker) return await LocalPolicy.load(modelDir, engineOptions);
  const channel = new WorkerChannel();
  try {
    const config = await channel.call<Qwen3Config>("load", modelDir, engineOptions);
    return new WorkerPolicy(channel, config);
  } catch (e) {
    channel.terminate();
    throw e;
  }
}

/** Request/response over one Worker. */
class WorkerChannel {
  readonly #worker: Worker;
  readonly #pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  /** Token listeners of streamed turns, by stream key (progress messages of worker.ts). */
  readonly #streams = new Map<number, (event: TokenEvent) => void>();
  #next = 1;

  /**
   * Why the worker is gone (crashed or terminated), or null while it runs: a call then is refused at once,
   * since a message to a gone worker is never answered.
   */
  #ended: Error | null = null;

  /** [messages posted, messages received by the worker]: the worker's yields read it (yield.ts). */
  readonly #counts = new Int32Array(new SharedArrayBuffer(8));

  constructor() {
    this.#worker = new Worker(new URL("./worker.ts", import.meta.url), { type: "module" });
    this.#worker.postMessage({ id: 0, op: "watch", args: [this.#counts] });
    this.#worker.onmessage = (event: MessageEvent<Response>) => {
      if (event.data.progress !== undefined) {
        return this.#streams.get(event.data.progress)?.(event.data.event!);
      }
      const { id, ok } = event.data;
      const waiter = this.#pending.get(id);
      this.#pending.delete(id);
      if (!waiter) return;
      if (ok) waiter.resolve(event.data.value);
      else waiter.reject(deserializeError(event.data.error!));
    };
    this.#worker.onerror = (event) => {
      event.preventDefault();
      this.#end(new Error(`policy worker crashed: ${event.message}; load the policy again`));
    };
  }

  get ended(): boolean {
    return this.#ended !== null;
  }

  /** Refuses every call waiting for an answer, and every later one, with `error`. */
  #end(error: Error): void {
    this.#ended ??= error;
    for (const waiter of this.#pending.values()) waiter.reject(this.#ended);
    this.#pending.clear();
  }

  call<T>(op: string, ...args: unknown[]): Promise<T> {
    if (this.#ended) return Promise.reject(this.#ended);
    const id = this.#next++;
    return new Promise<T>((resolve, reject) => {
      this.#pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      Atomics.add(this.#counts, 0, 1);
      this.#worker.postMessage({ id, op, args });
    });
  }

  /** Routes the progress messages of stream `key` to `listener` until `unlisten`. */
  listen(key: number, listener: (event: TokenEvent) => void): void {
    this.#streams.set(key, listener);
  }

  unlisten(key: number): void {
    this.#streams.delete(key);
  }

  /** Ends the worker; calls still waiting, a turn in flight say, are refused (`#end`). */
  terminate(): void {
    this.#worker.terminate();
    this.#end(new Error("policy: it was closed; load the policy again to use it"));
  }
}

interface Response {
  id: number;
  ok: boolean;
  /** Set on a progress message: the stream key, with the token `event`. */
  progress?: number;
  event?: TokenEvent;
  value?: unknown;
  error?: SerializedError;
}

class WorkerPolicy implements Policy {
  readonly config: Qwen3Config;
  readonly #channel: WorkerChannel;
  #nextAbortKey = 1;
  #nextStreamKey = 1;

  constructor(channel: WorkerChannel, config: Qwen3Config) {
    this.#channel = channel;
    this.config = config;
  }

  adapterId(): Promise<string> {
    return this.#channel.call("adapterId");
  }

  logprobs(seqs: readonly (readonly number[])[], options?: LogprobOptions): Promise<Float32Array[]> {
    return this.#channel.call("logprobs", seqs, options);
  }

  scoreWithAlternatives(
    seqs: readonly (readonly number[])[],
    options: LogprobOptions & { k: number },
  ): Promise<ScoredWithAlternatives[]> {
    return this.#channel.call("scoreWithAlternatives", seqs, options);
  }

  generate(
    prompts: readonly (readonly number[])[],
    options: GenerateOptions & BatchOptions,
  ): Promise<Generation[]> {
    return this.#channel.call("generate", prompts, options);
  }

  async startBatch(
    prompts: readonly (readonly number[])[],
    options: BatchOptions & { capacity: number },
  ): Promise<GenerationSession> {
    const { id, size } = await this.#channel.call<{ id: number; size: number }>(
      "startBatch",
      prompts,
      options,
    );
    const call = <T>(op: string, ...args: unknown[]) => this.#channel.call<T>(op, id, ...args);
    return {
      size,
      generate: (o, which) => call<Generation[]>("batchGenerate", o, which),
      append: (i, tokens) => call<void>("batchAppend", i, tokens),
      tokens: (i) => call<number[]>("batchTokens", i),
      stats: () => call<BatchStats>("batchStats"),
      close: () => call<void>("batchClose"),
    };
  }

  /**
   * A signal cannot cross to the Worker: the sequence gets a key there, and an abort here posts
   * `abortSequence` with it, which the Worker reads between decode steps (yield.ts).
   */
  async openSequence(prompt: readonly number[], options: SequenceOptions): Promise<PolicySequence> {
    const { signal, ...rest } = options;
    if (signal?.aborted) throw abortError("opening the sequence");
    const key = signal ? this.#nextAbortKey++ : null;
    const abort = () => void this.#channel.call("abortSequence", key).catch(() => {});
    signal?.addEventListener("abort", abort, { once: true });
    let id: number;
    try {
      id = await this.#channel.call<number>("openSequence", prompt, rest, key);
    } catch (error) {
      signal?.removeEventListener("abort", abort);
      throw error;
    }
    const call = <T>(op: string, ...args: unknown[]) => this.#channel.call<T>(op, id, ...args);
    return {
      generate: (o) => this.#streamedTurn(id, o),
      append: (tokens) => call<void>("seqAppend", tokens),
      tokens: () => call<number[]>("seqTokens"),
      close: () => {
        signal?.removeEventListener("abort", abort);
        return call<void>("seqClose", key);
      },
    };
  }

  sequenceStats(): Promise<BatchStats> {
    return this.#channel.call("sequenceStats");
  }

  /**
   * A turn of sequence `id`. A function cannot cross to the Worker: with `onToken`, the Worker posts each
   * token as a progress message under a stream key, and when the listener returns true, `stopTurn` asks
   * it to end the turn (read between decode steps, so a token or two may follow).
   */
  async #streamedTurn(id: number, options: GenerateOptions): Promise<Generation> {
    const { onToken, ...rest } = options;
    if (!onToken) return await this.#channel.call<Generation>("seqGenerate", id, rest, null);
    const key = this.#nextStreamKey++;
    let stopping = false;
    // A listener that throws ends its turn with its error, as on this thread (scheduler.ts `#accept`); the
    // error is kept here, since a throw inside the worker's message handler would reach no caller.
    const listener = { failed: false, error: undefined as unknown };
    this.#channel.listen(key, (event) => {
      if (listener.failed) return;
      let stop: boolean;
      try {
        stop = onToken(event) === true;
      } catch (error) {
        Object.assign(listener, { failed: true, error });
        stop = true;
      }
      if (stop && !stopping) {
        stopping = true;
        void this.#channel.call("stopTurn", key).catch(() => {});
      }
    });
    try {
      const generation = await this.#channel.call<Generation>("seqGenerate", id, rest, key);
      if (listener.failed) throw listener.error;
      return generation;
    } finally {
      this.#channel.unlisten(key);
    }
  }

  setAdapter(adapter: string | Adapter | null): Promise<void> {
    return this.#channel.call("setAdapter", adapter);
  }

  async close(): Promise<void> {
    if (this.#channel.ended) return; // closed already, or its worker crashed: nothing left to close
    try {
      await this.#channel.call("close");
    } finally {
      this.#channel.terminate();
    }
  }
}
