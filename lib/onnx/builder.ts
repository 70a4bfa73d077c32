/**
 * A graph builder with named values, symbolic dims, scopes and Loop/If subgraphs.
 *
 * ```ts
 * import { GraphBuilder } from "./builder.ts";
 * const g = new GraphBuilder("mlp");
 * const x = g.input("x", "float32", ["B", 4]);          // [B, 4]
 * const w = g.initializer("w", new Float32Array(12), [4, 3]);
 * const y = g.op("MatMul", [x, w]);                      // [B, 3]
 * g.output(y, "y");
 * const bytes = g.toModel();                             // ONNX ModelProto bytes
 * ```
 *
 * Names are global across a model and its subgraphs (ONNX forbids a subgraph from shadowing an outer
 * name), so a sub-builder shares its root's name table; its constants are hoisted to the root graph.
 */

import {
  type AttrValue,
  type Dim,
  encodeModel,
  type ExternalRef,
  type GraphData,
  type NodeData,
} from "./proto.ts";
import type { OpsetId, TensorData, TensorInfo } from "./proto.ts";
import { arrayOf, type DType, DTYPE_BYTES, dtypeOfArray, rawBytes, type TensorArray } from "./dtype.ts";
import { type AttrMap, normalizeAttrs } from "./attrs.ts";
import { trackInts } from "./shape.ts";

export { attr, type AttrMap, type AttrShorthand } from "./attrs.ts";

/** A named tensor in a graph; dtype and shape are tracked where the emitter knows them. */
export interface Value {
  readonly name: string;
  readonly dtype?: DType;
  readonly shape?: readonly Dim[];
}

/** A node input: `null` or `undefined` leaves an optional input out (encoded as `""`). */
export type Input = Value | null | undefined;

/** A node as recorded by the builder, for inspection and for the reverse (autodiff) walk. */
export interface NodeRecord {
  readonly opType: string;
  readonly domain: string;
  readonly name: string;
  readonly inputs: readonly (Value | null)[];
  readonly outputs: readonly Value[];
  readonly attrs: Readonly<Record<string, AttrValue>>;
  /** A stop-gradient (`detach`): autodiff treats its outputs as constants. */
  readonly stopsGradient?: true;
}

/** Options of `GraphBuilder.op`. */
export interface OpOptions {
  /** Operator set domain; `""` (default ONNX) unless given, e.g. `"com.microsoft"`. */
  domain?: string;
  /** Readable base name of the node and its outputs (deduplicated, prefixed by the scope). */
  name?: string;
  /** Output dtype(s) for tracking; defaults to the first input's dtype. */
  dtype?: DType | readonly (DType | undefined)[];
  /** Output shape(s) for tracking, where known. */
  shape?: readonly Dim[] | readonly (readonly Dim[] | undefined)[];
  /** Autodiff passes no gradient through this node (`detach`, lib/onnx/detach.ts). */
  stopsGradient?: true;
}

/** Options of `GraphBuilder.toModel`. */
export interface ModelOptions {
  /** Opset per domain; the defaults are `{"": 21, "com.microsoft": 1}` for the domains in use. */
  opsets?: Readonly<Record<string, number>>;
  /** Overrides the IR version implied by the default-domain opset. */
  irVersion?: number;
  doc?: string;
  metadata?: Readonly<Record<string, string>>;
}

/**
 * Default ONNX opset. 21 rather than the newest because every op we use is unchanged since, and
 * execution providers (WebGPU, CUDA) register kernels for it; `toModel({opsets: {"": 23}})` opts in
 * to newer ones (onnxruntime 1.30 accepts up to 26, with IR version 13).
 */
export const DEFAULT_OPSET = 21;

/** The IR version of the ONNX release that introduced each opset (onnxruntime 1.30 reads IR ≤ 13). */
export function irVersionFor(opset: number): number {
  if (opset <= 20) return 9;
  if (opset <= 22) return 10;
  if (opset === 23) return 11;
  if (opset <= 25) return 12;
  return 13;
}

/** Name table and constant cache shared by a root graph and all its subgraphs. */
class Shared {
  readonly used = new Set<string>();
  readonly initializers: TensorData[] = [];
  readonly constants = new Map<string, Value>();

  /** `base`, or `base_1`, `base_2`, … whichever is free first, reserved. */
  fresh(base: string): string {
    const name = this.free(base);
    this.used.add(name);
    return name;
  }

  /** The name `fresh` would return, not reserved. */
  free(base: string): string {
    let name = base;
    for (let k = 1; this.used.has(name); k++) name = `${base}_${k}`;
    return name;
  }

  /** Claims an exact name (graph inputs, outputs, initializers); a clash is a bug in the caller. */
  claim(name: string): string {
    if (this.used.has(name)) throw new Error(`graph name ${JSON.stringify(name)} is already in use`);
    this.used.add(name);
    return name;
  }
}

/** Builds one ONNX graph; `subgraph()` makes the bodies of Loop and If. */
export class GraphBuilder {
  readonly name: string;
  /** Nodes in emission order (a valid topological order). */
  readonly nodes: NodeRecord[] = [];
  private readonly shared: Shared;
  private readonly isRoot: boolean;
  private readonly inputs: TensorInfo[] = [];
  private readonly outputs: TensorInfo[] = [];
  private readonly produced = new Map<string, NodeRecord>();
  private readonly reshapeTargets = new Map<string, Value>();
  private prefix: string[] = [];

  constructor(name: string, parent?: GraphBuilder) {
    this.name = name;
    this.isRoot = parent === undefined;
    this.shared = parent?.shared ?? new Shared();
    this.prefix = parent ? [...parent.prefix] : [];
  }

  /** A graph input with an exact name; dims are numbers or symbolic names such as `"B"`. */
  input(name: string, dtype: DType, dims?: readonly Dim[]): Value {
    this.inputs.push({ name: this.shared.claim(name), dtype, dims });
    return { name, dtype, shape: dims };
  }

  /**
   * Marks `value` as a graph output named `name` (default: its own name). An Identity is inserted when
   * the name differs, or the value is not computed by this graph (an input, a constant, an outer value).
   * The declared type is the tracked dtype (none when unknown: onnxruntime infers it) and `dims`.
   */
  output(value: Value, name?: string, dims?: readonly Dim[]): Value {
    const outName = name ?? value.name;
    const alreadyOut = this.outputs.some((o) => o.name === value.name);
    let out = value;
    if (!this.produced.has(value.name) || outName !== value.name || alreadyOut) {
      const fresh = name === undefined ? this.shared.fresh(`${value.name}/out`) : this.shared.claim(name);
      out = this.record("Identity", "", fresh, [value], [{ ...value, name: fresh }], {});
    }
    // Tracked shapes are best-effort, so only dims the caller states are declared to onnxruntime.
    this.outputs.push({ name: out.name, dtype: out.dtype, dims });
    return out;
  }

  /** An inline initializer with an exact name (dtype from the array unless given). */
  initializer(name: string, data: TensorArray, dims: readonly number[], dtype?: DType): Value {
    const type = dtype ?? dtypeOfArray(data);
    checkSize(name, type, dims, data.byteLength);
    this.shared.initializers.push({ name: this.shared.claim(name), dtype: type, dims, raw: rawBytes(data) });
    return { name, dtype: type, shape: dims };
  }

  /** An initializer whose bytes stay in a file (e.g. inside `model.safetensors`), at `ref.offset`. */
  external(name: string, dtype: DType, dims: readonly number[], ref: ExternalRef): Value {
    checkSize(name, dtype, dims, ref.length);
    this.shared.initializers.push({ name: this.shared.claim(name), dtype, dims, external: { ...ref } });
    return { name, dtype, shape: dims };
  }

  /** A constant tensor; small ones are shared by content across the whole model. */
  constant(data: TensorArray, dims: readonly number[], dtype?: DType): Value {
    const type = dtype ?? dtypeOfArray(data);
    const raw = rawBytes(data);
    const small = raw.length <= 256;
    const key = small ? `${type}|${dims.join(",")}|${raw.join(",")}` : "";
    const cached = small ? this.shared.constants.get(key) : undefined;
    if (cached) return cached;
    const shown = data.length <= 4 ? `_${Array.from(data, String).join("_")}` : "";
    const name = this.shared.fresh(`const_${type}${shown}`);
    checkSize(name, type, dims, raw.length);
    this.shared.initializers.push({ name, dtype: type, dims, raw: raw.slice() });
    const value = { name, dtype: type, shape: dims };
    if (small) this.shared.constants.set(key, value);
    return value;
  }

  /** A scalar constant (rank 0). */
  scalar(value: number, dtype: DType = "float32"): Value {
    return this.constant(arrayOf(dtype, [value]), [], dtype);
  }

  /** A 1-D int64 constant, e.g. axes, shapes, starts and ends. */
  ints(values: readonly number[]): Value {
    // Its contents are tracked, so a shape computed from it (Reshape, Expand targets) is tracked too.
    return trackInts(this.constant(arrayOf("int64", values), [values.length], "int64"), values);
  }

  /** A 1-D constant of any non-16-bit dtype. */
  vector(values: readonly number[], dtype: DType = "float32"): Value {
    return this.constant(arrayOf(dtype, values), [values.length], dtype);
  }

  /** Runs `build` with `prefix` added to the names of the nodes it emits (`layers.3.attn/MatMul`). */
  scope<T>(prefix: string, build: () => T): T {
    this.prefix.push(prefix);
    try {
      return build();
    } finally {
      this.prefix.pop();
    }
  }

  /** Emits a single-output node and returns its output. */
  op(opType: string, inputs: readonly Input[], attrs: AttrMap = {}, options: OpOptions = {}): Value {
    return this.opN(opType, inputs, 1, attrs, options)[0];
  }

  /** Emits a node with `count` outputs (trailing optional outputs can be left off by a smaller count). */
  opN(
    opType: string,
    inputs: readonly Input[],
    count: number,
    attrs: AttrMap = {},
    options: OpOptions = {},
  ): Value[] {
    const base = [...this.prefix, options.name ?? opType].join("/");
    const nodeName = this.shared.fresh(base);
    const outputs: Value[] = [];
    for (let i = 0; i < count; i++) {
      const name = count === 1 ? nodeName : this.shared.fresh(`${nodeName}:${i}`);
      // An explicit per-output list is taken as is; otherwise outputs default to the first input's dtype.
      const dtype = Array.isArray(options.dtype)
        ? options.dtype[i]
        : pick(options.dtype, i) ?? inputs.find((v) => v)?.dtype;
      outputs.push({ name, dtype, shape: pickShape(options.shape, i) });
    }
    this.record(opType, options.domain ?? "", nodeName, inputs, outputs, attrs, options.stopsGradient);
    return outputs;
  }

  /** A name starting with `base` that is free model-wide, to pass to `input()` at once. */
  uniqueName(base: string): string {
    return this.shared.free(base);
  }

  /** A sub-builder for a Loop or If body; it can use any value of this graph by reference. */
  subgraph(name: string): GraphBuilder {
    return new GraphBuilder(this.shared.fresh([...this.prefix, name].join("/")), this);
  }

  /**
   * Sets input `index` of `node` (absent or null so far) to `value`, which this graph computes before the
   * node (the emission order stays topological). For the reverse walk, which folds a sum into a Gemm's C.
   */
  setInput(node: NodeRecord, index: number, value: Value): void {
    const at = this.nodes.indexOf(node);
    const source = this.produced.get(value.name);
    if (at < 0 || (source && this.nodes.indexOf(source) > at) || (node.inputs[index] ?? null) !== null) {
      throw new Error(
        `setInput: ${value.name} cannot become input ${index} of node ${node.name} of ${this.name}`,
      );
    }
    const inputs = node.inputs as (Value | null)[];
    while (inputs.length < index) inputs.push(null);
    inputs[index] = value;
  }

  /**
   * Records that the int64 vector `target` (a Reshape target: -1 allowed) reshapes any tensor of `value`'s
   * size to `value`'s shape, so that a gradient rule can reshape to it without reading `value`'s shape
   * at run time (a Shape kernel).
   */
  noteReshapeTarget(value: Value, target: Value): void {
    this.reshapeTargets.set(value.name, target);
  }

  /** The target `noteReshapeTarget` recorded for `value`, if any. */
  reshapeTargetOf(value: Value): Value | undefined {
    return this.reshapeTargets.get(value.name);
  }

  /** The node that computes `value` in this graph, if any. */
  producer(value: Value): NodeRecord | undefined {
    return this.produced.get(value.name);
  }

  /** This graph as plain data (the root graph also carries every initializer). */
  toGraph(): GraphData {
    const nodes = this.liveNodes();
    return {
      name: this.name,
      nodes: nodes.map(nodeData),
      initializers: this.isRoot ? this.shared.initializers : [],
      inputs: this.inputs,
      outputs: this.outputs,
      valueInfo: this.valueInfo(nodes),
    };
  }

  /**
   * The nodes an output depends on, in emission order. onnxruntime runs every node of a graph, read or
   * not, and ONNX ops have no side effects, so the rest would only cost kernels: a gradient rule may
   * emit a value that the next rule reads through (a Transpose of a Transpose, grad_matmul.ts).
   */
  private liveNodes(): NodeRecord[] {
    const needed = new Set(this.outputs.map((o) => o.name));
    const live: NodeRecord[] = [];
    for (let i = this.nodes.length - 1; i >= 0; i--) {
      const node = this.nodes[i];
      if (!node.outputs.some((v) => needed.has(v.name))) continue;
      live.push(node);
      for (const v of node.inputs) if (v) needed.add(v.name);
      for (const a of Object.values(node.attrs)) if (a.type === "graph") namesReadBy(a.value, needed);
    }
    return live.reverse();
  }

  /**
   * Tracked dtypes and shapes of intermediate values, as ONNX value_info. onnxruntime's own shape
   * inference loses symbolic dims at computed reshapes (it yields unknown dims there); stating them
   * keeps dims such as "N" consistent, so its memory planner can match freed buffers to new values.
   * Without that, planning a training graph's backward pass is quadratic (every new value scans every
   * unmatched freed one): 28 s for Qwen3-0.6B's, under 2 s with value_info.
   */
  private valueInfo(nodes: readonly NodeRecord[]): TensorInfo[] {
    const outputs = new Set(this.outputs.map((o) => o.name));
    const known = (dims: readonly Dim[] | undefined): dims is readonly Dim[] =>
      dims !== undefined && dims.every((d) => (typeof d === "number" ? d >= 0 : d.length > 0));
    return nodes.flatMap((node) =>
      node.outputs
        .filter((v) => v.dtype && known(v.shape) && !outputs.has(v.name))
        .map((v) => ({ name: v.name, dtype: v.dtype, dims: v.shape }))
    );
  }

  /** Encodes the whole model as ONNX ModelProto bytes. */
  toModel(options: ModelOptions = {}): Uint8Array {
    if (!this.isRoot) throw new Error(`toModel() on subgraph ${this.name}: call it on the root builder`);
    const graph = this.toGraph();
    const versions: Record<string, number> = { "": DEFAULT_OPSET, "com.microsoft": 1, ...options.opsets };
    const domains = new Set(["", ...usedDomains(graph)]);
    const opsets: OpsetId[] = [...domains].map((domain) => ({ domain, version: opsetOf(versions, domain) }));
    return encodeModel({
      irVersion: options.irVersion ?? irVersionFor(versions[""]),
      opsets,
      graph,
      producerName: "deno-rl",
      doc: options.doc,
      metadata: options.metadata,
    });
  }

  private record(
    opType: string,
    domain: string,
    name: string,
    inputs: readonly Input[],
    outputs: Value[],
    attrs: AttrMap,
    stopsGradient?: true,
  ): Value {
    const node: NodeRecord = {
      opType,
      domain,
      name,
      inputs: inputs.map((v) => v ?? null),
      outputs,
      attrs: normalizeAttrs(attrs),
      ...(stopsGradient ? { stopsGradient } : {}),
    };
    this.nodes.push(node);
    for (const out of outputs) this.produced.set(out.name, node);
    return outputs[0];
  }
}

function nodeData(node: NodeRecord): NodeData {
  return {
    opType: node.opType,
    domain: node.domain,
    name: node.name,
    inputs: node.inputs.map((v) => v?.name ?? ""),
    outputs: node.outputs.map((v) => v.name),
    attrs: node.attrs,
  };
}

/** Adds to `names` every value `graph` reads, its subgraphs' included (outer-scope references among them). */
function namesReadBy(graph: GraphData, names: Set<string>): void {
  for (const out of graph.outputs) names.add(out.name);
  for (const node of graph.nodes) {
    for (const name of node.inputs) if (name) names.add(name);
    for (const a of Object.values(node.attrs ?? {})) if (a.type === "graph") namesReadBy(a.value, names);
  }
}

/** Domains of all nodes, subgraphs included. */
function usedDomains(graph: GraphData): Set<string> {
  const found = new Set<string>();
  for (const node of graph.nodes) {
    if (node.domain) found.add(node.domain);
    for (const a of Object.values(node.attrs ?? {})) {
      if (a.type === "graph") { for (const d of usedDomains(a.value)) found.add(d); }
    }
  }
  return found;
}

function opsetOf(versions: Record<string, number>, domain: string): number {
  const version = versions[domain];
  if (version === undefined) {
    throw new Error(`toModel: no opset version for domain ${JSON.stringify(domain)}; pass it in opsets`);
  }
  return version;
}

function checkSize(name: string, dtype: DType, dims: readonly number[], bytes: number): void {
  const expected = dims.reduce((a, b) => a * b, 1) * DTYPE_BYTES[dtype];
  if (expected !== bytes) {
    throw new Error(`tensor ${name}: ${dtype} [${dims.join(", ")}] needs ${expected} bytes, got ${bytes}`);
  }
}

function pick<T>(option: T | readonly (T | undefined)[] | undefined, i: number): T | undefined {
  if (Array.isArray(option)) return option[i];
  return i === 0 ? option as T | undefined : undefined;
}

function pickShape(
  option: readonly Dim[] | readonly (readonly Dim[] | undefined)[] | undefined,
  i: number,
): readonly Dim[] | undefined {
  if (option === undefined) return undefined;
  const nested = option.length > 0 && option.every((d) => Array.isArray(d) || d === undefined);
  if (nested) return (option as readonly (readonly Dim[] | undefined)[])[i];
  return i === 0 ? option as readonly Dim[] : undefined;
}
