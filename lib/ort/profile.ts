/**
 * onnxruntime's profiles read back as runs. With profiling on (lib/engine/session.ts turns it on under
 * DENO_RL_ORT_PROFILE) a session writes, when it closes, one Chrome-trace JSON array of events:
 *
 *   - `model_run` (cat "Session"): one `Run` call, host wall time;
 *   - `<node>_kernel_time` (cat "Node"): one node's kernel on the host — for a GPU provider the time to
 *     record and dispatch its work, not the GPU's; `args` name the op, the provider and the shapes;
 *   - GPU timestamps, where the provider writes them. onnxruntime 1.30's WebGPU provider does, with no
 *     option beyond profiling itself, wherever the device has the `timestamp-query` feature (Mesa's
 *     lavapipe has it): one event per compute dispatch, cat "Api", pid -1, named
 *     `<node>&<op>&<program>`, its `ts` shifted onto the host's timeline at the run's first submit. The
 *     CUDA provider writes none (that needs onnxruntime built with CUDA profiling; releases are not).
 *
 * A run holds the node events whose `ts` falls inside its `model_run` and the GPU events that start
 * between its start and the next run's (the GPU may finish a little after the host's clock says).
 *
 * Host time is each kernel's own: a control-flow node (If, Loop) runs its subgraph's nodes inside its own
 * event, and those have events of their own, so a node's time less that of the nodes nested in it is what
 * it spent itself (otherwise the subgraph would count twice). On lavapipe the decode step's If nodes took
 * most of its host time themselves: an If reads its condition on the host, so it waits for the GPU work
 * that computes it.
 *
 * @module
 */

import { UserError } from "../errors.ts";

/** The fields of one trace event read here. */
export interface TraceEvent {
  cat?: string;
  name: string;
  ts: number;
  dur: number;
  pid?: number;
  args?: Record<string, unknown>;
}

/** A tensor's element type and dims, as the profile writes them: `{ float: [2, 64] }`. */
export type TypeShape = Record<string, number[]>;

/** One node's kernel on the host. */
export interface NodeEvent {
  name: string;
  op: string;
  provider: string;
  /** Start and duration, µs. */
  ts: number;
  dur: number;
  inputs: TypeShape[];
  outputs: TypeShape[];
}

/** One GPU dispatch the provider timed. */
export interface GpuEvent {
  node: string;
  op: string;
  /** The provider's program (a node may dispatch several). */
  program: string;
  /** Start (on the host's timeline) and duration, µs. */
  ts: number;
  dur: number;
}

/** One `Run` of the session. */
export interface ProfileRun {
  /** Start and host wall time, µs. */
  ts: number;
  dur: number;
  nodes: NodeEvent[];
  gpu: GpuEvent[];
}

/** Time of one op type within a run. */
export interface OpTime {
  op: string;
  kernels: number;
  hostMs: number;
  /** Null where the profile has no GPU timestamps. */
  gpuMs: number | null;
}

/** What one run cost. */
export interface RunSummary {
  /** Node kernels run (onnxruntime's, on any provider). */
  kernels: number;
  /** GPU dispatches timed; null where the profile has no GPU timestamps. */
  gpuDispatches: number | null;
  /** The run's host wall time. */
  runMs: number;
  /** The node kernels' host time, summed. */
  hostMs: number;
  /** The GPU dispatches' time, summed (busy time, not the span); null where absent. */
  gpuMs: number | null;
  /** Op types by host time, most first. */
  ops: OpTime[];
}

const KERNEL_SUFFIX = "_kernel_time";

/** The events of a profile's text; a one-line UserError where it is not onnxruntime's trace array. */
export function parseTrace(text: string, source = "profile"): TraceEvent[] {
  let trace: unknown;
  try {
    trace = JSON.parse(text);
  } catch (e) {
    throw new UserError(`onnxruntime profile ${source}`, {
      why: `it is not JSON (${(e as Error).message})`,
      fix: "pass the file a session wrote with profiling on, after the session closed",
    });
  }
  if (!Array.isArray(trace) || !trace.every(isEvent)) {
    throw new UserError(`onnxruntime profile ${source}`, {
      why: "it is not an array of trace events with name, ts and dur",
      fix: "pass the JSON file onnxruntime wrote under the profile prefix",
    });
  }
  return trace;
}

function isEvent(e: unknown): e is TraceEvent {
  const o = e as Partial<TraceEvent> | null;
  return typeof o === "object" && o !== null && typeof o.name === "string" &&
    typeof o.ts === "number" && typeof o.dur === "number";
}

/** Reads and parses the profile at `path`. */
export async function readTrace(path: string): Promise<TraceEvent[]> {
  return parseTrace(await Deno.readTextFile(path), path);
}

/** The node kernels of a trace, in its order. */
export function nodeEvents(trace: readonly TraceEvent[]): NodeEvent[] {
  return trace.filter((e) => e.cat === "Node" && e.name.endsWith(KERNEL_SUFFIX) && e.args?.provider)
    .map((e) => ({
      name: e.name.slice(0, -KERNEL_SUFFIX.length),
      op: String(e.args!.op_name),
      provider: String(e.args!.provider),
      ts: e.ts,
      dur: e.dur,
      inputs: (e.args!.input_type_shape ?? []) as TypeShape[],
      outputs: (e.args!.output_type_shape ?? []) as TypeShape[],
    }));
}

/** The WebGPU provider's timed dispatches (cat "Api", pid -1, `node&op&program`). */
export function gpuEvents(trace: readonly TraceEvent[]): GpuEvent[] {
  return trace.filter((e) => e.cat === "Api" && e.pid === -1 && e.name.split("&").length >= 3)
    .map((e) => {
      const parts = e.name.split("&");
      return {
        node: parts.slice(0, -2).join("&"),
        op: parts.at(-2)!,
        program: parts.at(-1)!,
        ts: e.ts,
        dur: e.dur,
      };
    });
}

/** The trace's runs in time order, each with its node kernels and GPU dispatches. */
export function profileRuns(trace: readonly TraceEvent[]): ProfileRun[] {
  const runs = trace.filter((e) => e.cat === "Session" && e.name === "model_run")
    .sort((a, b) => a.ts - b.ts);
  const nodes = nodeEvents(trace), gpu = gpuEvents(trace);
  return runs.map((r, i) => {
    const next = runs[i + 1]?.ts ?? Infinity;
    return {
      ts: r.ts,
      dur: r.dur,
      nodes: nodes.filter((n) => n.ts >= r.ts && n.ts <= r.ts + r.dur),
      gpu: gpu.filter((g) => g.ts >= r.ts && g.ts < next),
    };
  });
}

/**
 * The runs of the session that ran most, among several sessions' traces: the graph a measurement ran over
 * and over (the others are helpers opened once). Empty where no trace has a run.
 */
export function busiestRuns(traces: readonly (readonly TraceEvent[])[]): ProfileRun[] {
  return traces.map(profileRuns).sort((a, b) => b.length - a.length)[0] ?? [];
}

/** Kernels, host and GPU time of one run, and its `top` op types by host time. */
export function summarizeRun(run: ProfileRun, top = 8): RunSummary {
  const timed = run.gpu.length > 0;
  const own = ownTimes(run.nodes);
  const sum = (values: readonly number[]) => values.reduce((s, v) => s + v, 0) / 1000;
  const ops = [...new Set(run.nodes.map((n) => n.op))].map((op): OpTime => {
    const mine = run.nodes.flatMap((n, i) => (n.op === op ? [own[i]] : []));
    return {
      op,
      kernels: mine.length,
      hostMs: sum(mine),
      gpuMs: timed ? sum(run.gpu.filter((g) => g.op === op).map((g) => g.dur)) : null,
    };
  });
  return {
    kernels: run.nodes.length,
    gpuDispatches: timed ? run.gpu.length : null,
    runMs: run.dur / 1000,
    hostMs: sum(own),
    gpuMs: timed ? sum(run.gpu.map((g) => g.dur)) : null,
    ops: ops.sort((a, b) => b.hostMs - a.hostMs).slice(0, top),
  };
}

/** Each node's own host time, µs: its duration less that of the nodes that start inside it (its subgraph's). */
export function ownTimes(nodes: readonly NodeEvent[]): number[] {
  const own = nodes.map((n) => n.dur);
  const order = nodes.map((_, i) => i).sort((a, b) =>
    nodes[a].ts - nodes[b].ts || nodes[b].dur - nodes[a].dur
  );
  const open: number[] = []; // the nodes the current one may be nested in, outermost first
  for (const i of order) {
    const n = nodes[i];
    while (open.length > 0 && !startsInside(n, nodes[open.at(-1)!])) open.pop();
    if (open.length > 0) own[open.at(-1)!] -= n.dur;
    open.push(i);
  }
  return own.map((t) => Math.max(0, t));
}

function startsInside(inner: NodeEvent, outer: NodeEvent): boolean {
  return inner.ts >= outer.ts && inner.ts < outer.ts + outer.dur;
}
