/**
 * onnxruntime's per-node profiles (lib/engine/session.ts writes them under DENO_RL_ORT_PROFILE), read back
 * to see which provider ran each node and what crossed between host and device inside a run.
 *
 * @module
 */

import { join } from "node:path";

/** One node execution from a profile. */
export interface NodeEvent {
  name: string;
  op: string;
  provider: string;
  inputs: Record<string, number[]>[];
  outputs: Record<string, number[]>[];
}

/** Runs `fn` with profiling on for every engine session it opens; returns their node events. */
export async function profiled(fn: () => Promise<void>): Promise<NodeEvent[]> {
  const dir = await Deno.makeTempDir({ prefix: "ort-profile-" });
  Deno.env.set("DENO_RL_ORT_PROFILE", join(dir, "profile"));
  try {
    await fn();
  } finally {
    Deno.env.delete("DENO_RL_ORT_PROFILE");
  }
  const events: NodeEvent[] = [];
  for await (const file of Deno.readDir(dir)) {
    const trace = JSON.parse(await Deno.readTextFile(join(dir, file.name))) as {
      cat?: string;
      name: string;
      args?: Record<string, unknown>;
    }[];
    for (const e of trace) {
      if (e.cat !== "Node" || !e.name.endsWith("_kernel_time") || !e.args?.provider) continue;
      events.push({
        name: e.name.slice(0, -"_kernel_time".length),
        op: String(e.args.op_name),
        provider: String(e.args.provider),
        inputs: (e.args.input_type_shape ?? []) as Record<string, number[]>[],
        outputs: (e.args.output_type_shape ?? []) as Record<string, number[]>[],
      });
    }
  }
  await Deno.remove(dir, { recursive: true });
  return events;
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
