/**
 * The Worker that owns onnxruntime: a `LocalPolicy` and its open generation batches, driven by
 * messages from `WorkerPolicy` (worker_policy.ts). `session.run` blocks its thread, so running it
 * here keeps the main thread free for progress output, file I/O and tool calls.
 *
 * Protocol: `{ id, op, args }` in; `{ id, ok: true, value }` or `{ id, ok: false, error }` out.
 *
 * @module
 */

/// <reference lib="deno.worker" />

import { LocalPolicy } from "./local_policy.ts";
import type { GenerationSession, PolicySequence, TokenEvent } from "./policy.ts";
import { serializeError } from "./worker_errors.ts";
import { watchParentMessages } from "./yield.ts";

/** A request from the main thread. */
export interface WorkerRequest {
  id: number;
  op: string;
  args: unknown[];
}

let policy: LocalPolicy | null = null;
const batches = new Map<number, GenerationSession>();
let nextBatch = 1;
const sequences = new Map<number, PolicySequence>();
let nextSequence = 1;
/** Signals of cancellable sequences, by the key the main thread chose (worker_policy.ts). */
const aborts = new Map<number, AbortController>();
/** Stream keys of streamed turns whose listener asked them to end (worker_policy.ts). */
const stopping = new Set<number>();

function requirePolicy(): LocalPolicy {
  if (!policy) throw new Error("policy worker: load first");
  return policy;
}

function requireSequence(id: unknown): PolicySequence {
  const sequence = sequences.get(id as number);
  if (!sequence) throw new Error(`policy worker: no open sequence ${id}`);
  return sequence;
}

function requireBatch(id: unknown): GenerationSession {
  const batch = batches.get(id as number);
  if (!batch) throw new Error(`policy worker: no open batch ${id}`);
  return batch;
}

/** Each op: its arguments as sent, its result as returned (typed arrays are transferred back). */
// deno-lint-ignore no-explicit-any
const OPS: Record<string, (...args: any[]) => unknown> = {
  async load(dir, options) {
    policy = await LocalPolicy.load(dir, options);
    return policy.config;
  },
  adapterId: () => requirePolicy().adapterId(),
  logprobs: (seqs, options) => requirePolicy().logprobs(seqs, options),
  scoreWithAlternatives: (seqs, options) => requirePolicy().scoreWithAlternatives(seqs, options),
  generate: (prompts, options) => requirePolicy().generate(prompts, options),
  async startBatch(prompts, options) {
    const batch = await requirePolicy().startBatch(prompts, options);
    const id = nextBatch++;
    batches.set(id, batch);
    return { id, size: batch.size };
  },
  batchGenerate: (id, options, which) => requireBatch(id).generate(options, which),
  batchAppend: (id, i, tokens) => requireBatch(id).append(i, tokens),
  batchTokens: (id, i) => requireBatch(id).tokens(i),
  batchStats: (id) => requireBatch(id).stats(),
  async batchClose(id) {
    await batches.get(id)?.close();
    batches.delete(id);
  },
  async openSequence(prompt, options, abortKey: number | null) {
    const controller = abortKey === null ? null : new AbortController();
    if (controller) aborts.set(abortKey!, controller);
    try {
      const sequence = await requirePolicy().openSequence(prompt, { ...options, signal: controller?.signal });
      const id = nextSequence++;
      sequences.set(id, sequence);
      return id;
    } catch (error) {
      aborts.delete(abortKey!);
      throw error;
    }
  },
  abortSequence(abortKey) {
    aborts.get(abortKey)?.abort();
  },
  async seqGenerate(id, options, streamKey: number | null) {
    if (streamKey === null) return await requireSequence(id).generate(options);
    const onToken = (event: TokenEvent) => {
      self.postMessage({ progress: streamKey, event });
      return stopping.has(streamKey);
    };
    try {
      return await requireSequence(id).generate({ ...options, onToken });
    } finally {
      stopping.delete(streamKey);
    }
  },
  stopTurn(streamKey) {
    stopping.add(streamKey);
  },
  seqAppend: (id, tokens) => requireSequence(id).append(tokens),
  seqTokens: (id) => requireSequence(id).tokens(),
  async seqClose(id, abortKey: number | null) {
    await sequences.get(id)?.close();
    sequences.delete(id);
    if (abortKey !== null) aborts.delete(abortKey);
  },
  sequenceStats: () => requirePolicy().sequenceStats(),
  setAdapter: (adapter) => requirePolicy().setAdapter(adapter),
  async close() {
    for (const batch of batches.values()) await batch.close();
    batches.clear();
    sequences.clear();
    await policy?.close();
    policy = null;
  },
};

/** [messages the parent posted, messages received here] (worker_policy.ts); see yield.ts. */
let counts: Int32Array | null = null;

self.onmessage = async (event: MessageEvent<WorkerRequest>) => {
  const { id, op, args } = event.data;
  if (op === "watch") {
    const shared = args[0] as Int32Array;
    counts = shared;
    watchParentMessages(() => Atomics.load(shared, 0) > Atomics.load(shared, 1));
    return;
  }
  if (counts) Atomics.add(counts, 1, 1);
  try {
    const run = OPS[op];
    if (!run) throw new Error(`policy worker: unknown op ${op}`);
    const value = await run(...args);
    self.postMessage({ id, ok: true, value }, { transfer: transferables(value) });
  } catch (error) {
    self.postMessage({ id, ok: false, error: serializeError(error) });
  }
};

/** The buffers of typed arrays in a result (log-probs), moved instead of copied. */
function transferables(value: unknown): Transferable[] {
  if (!Array.isArray(value)) return [];
  return value.filter((v) => ArrayBuffer.isView(v)).map((v) => (v as Float32Array<ArrayBuffer>).buffer);
}
