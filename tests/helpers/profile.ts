/**
 * onnxruntime's per-node profiles (lib/engine/session.ts writes them under DENO_RL_ORT_PROFILE), read back
 * to see which provider ran each node and what crossed between host and device inside a run (the parser is
 * lib/ort/profile.ts).
 *
 * @module
 */

import { profiled as profiledTraces } from "../../lib/engine/profiled.ts";
import { type NodeEvent, nodeEvents } from "../../lib/ort/profile.ts";

export type { NodeEvent } from "../../lib/ort/profile.ts";

/**
 * Runs `fn` with profiling on for every engine session it opens; returns the node events of the sessions
 * that ran on a GPU provider (a session with any node there). CPU-only sessions are left out: the adapter
 * merge (lib/engine/merged_weights.ts) is one by design, a host computation once per adapter.
 */
export async function profiled(fn: () => Promise<void>): Promise<NodeEvent[]> {
  return (await profiledTraces(fn)).map(nodeEvents)
    .filter((events) => events.some((e) => e.provider !== "CPUExecutionProvider"))
    .flat();
}

function tensors(list: Record<string, number[]>[]): { dtype: string; size: number; dims: number[] }[] {
  return list.flatMap((t) =>
    Object.entries(t).map(([dtype, dims]) => ({ dtype, dims, size: dims.reduce((a, b) => a * b, 1) }))
  );
}

/** Nodes the CPU provider ran that read or write float data of more than one element (distinct names). */
export function cpuPlacedFloats(events: readonly NodeEvent[]): string[] {
  const found = new Set<string>();
  for (const e of events) {
    if (e.provider !== "CPUExecutionProvider" || e.op.startsWith("Memcpy")) continue;
    const floats = tensors([...e.inputs, ...e.outputs]).filter((t) =>
      t.dtype.startsWith("float") && t.size > 1
    );
    if (floats.length > 0) found.add(`${e.op} ${e.name}`);
  }
  return [...found];
}

/** What each copy to the host inside a run copied, as "dtype[dims]" (distinct). */
export function hostCopies(events: readonly NodeEvent[]): string[] {
  const found = new Set<string>();
  for (const e of events) {
    if (e.op !== "MemcpyToHost") continue;
    for (const t of tensors(e.inputs)) found.add(`${t.dtype}[${t.dims.join(", ")}]`);
  }
  return [...found];
}
