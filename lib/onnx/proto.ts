/**
 * ONNX ModelProto encoder: plain data in, protobuf bytes out. Field numbers follow `onnx/onnx.proto`
 * (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto, TypeProto,
 * TensorShapeProto, OperatorSetIdProto, StringStringEntryProto).
 */

import { type DType, ONNX_DTYPE } from "./dtype.ts";
import { ProtoWriter } from "./wire.ts";

/** A dimension: a fixed size, or a symbolic name (`dim_param`) such as `"B"` or `"T"`. */
export type Dim = number | string;

/** A graph input, output or value_info entry. No `dtype` = untyped; no `dims` = unknown rank. */
export interface TensorInfo {
  name: string;
  dtype?: DType;
  dims?: readonly Dim[];
}

/** Where an external initializer's bytes live: `offset` and `length` are bytes into `location`. */
export interface ExternalRef {
  /** Path relative to the model's external-data folder. */
  location: string;
  offset: number;
  length: number;
}

/** An initializer or tensor attribute: inline `raw` bytes or an `external` reference, never both. */
export interface TensorData {
  name: string;
  dtype: DType;
  dims: readonly number[];
  raw?: Uint8Array;
  external?: ExternalRef;
}

/** An attribute value, tagged with its ONNX AttributeType. */
export type AttrValue =
  | { type: "float"; value: number }
  | { type: "int"; value: number | bigint }
  | { type: "string"; value: string }
  | { type: "tensor"; value: TensorData }
  | { type: "graph"; value: GraphData }
  | { type: "floats"; value: readonly number[] }
  | { type: "ints"; value: readonly (number | bigint)[] }
  | { type: "strings"; value: readonly string[] };

/** One node. An empty string in `inputs` marks an optional input left out. */
export interface NodeData {
  opType: string;
  domain?: string;
  name?: string;
  inputs: readonly string[];
  outputs: readonly string[];
  attrs?: Readonly<Record<string, AttrValue>>;
}

/** A graph (the main graph or a Loop/If body). */
export interface GraphData {
  name: string;
  nodes: readonly NodeData[];
  initializers: readonly TensorData[];
  inputs: readonly TensorInfo[];
  outputs: readonly TensorInfo[];
  valueInfo?: readonly TensorInfo[];
  doc?: string;
}

/** One imported operator set: `""` is the default ONNX domain. */
export interface OpsetId {
  domain: string;
  version: number;
}

/** A whole model. */
export interface ModelData {
  irVersion: number;
  opsets: readonly OpsetId[];
  graph: GraphData;
  producerName?: string;
  producerVersion?: string;
  doc?: string;
  metadata?: Readonly<Record<string, string>>;
}

/** ONNX AttributeProto.AttributeType values. */
const ATTR_TYPE = {
  float: 1,
  int: 2,
  string: 3,
  tensor: 4,
  graph: 5,
  floats: 6,
  ints: 7,
  strings: 8,
} as const;

/** TensorProto.DataLocation.EXTERNAL. */
const EXTERNAL = 1;

/** Encodes a model as ONNX protobuf bytes, ready for `ort.InferenceSession.create(bytes)`. */
export function encodeModel(model: ModelData): Uint8Array {
  const w = new ProtoWriter();
  w.varint(1, model.irVersion);
  if (model.producerName) w.string(2, model.producerName);
  if (model.producerVersion) w.string(3, model.producerVersion);
  if (model.doc) w.string(6, model.doc);
  w.message(7, graphWriter(model.graph));
  for (const opset of model.opsets) {
    w.message(8, new ProtoWriter().string(1, opset.domain).varint(2, opset.version));
  }
  for (const [key, value] of Object.entries(model.metadata ?? {})) {
    w.message(14, entryWriter(key, value));
  }
  return w.finish();
}

/** GraphProto. */
export function graphWriter(graph: GraphData): ProtoWriter {
  const w = new ProtoWriter();
  for (const node of graph.nodes) w.message(1, nodeWriter(node));
  w.string(2, graph.name);
  for (const t of graph.initializers) w.message(5, tensorWriter(t));
  if (graph.doc) w.string(10, graph.doc);
  for (const info of graph.inputs) w.message(11, valueInfoWriter(info));
  for (const info of graph.outputs) w.message(12, valueInfoWriter(info));
  for (const info of graph.valueInfo ?? []) w.message(13, valueInfoWriter(info));
  return w;
}

/** NodeProto. */
export function nodeWriter(node: NodeData): ProtoWriter {
  const w = new ProtoWriter();
  for (const name of node.inputs) w.string(1, name);
  for (const name of node.outputs) w.string(2, name);
  if (node.name) w.string(3, node.name);
  w.string(4, node.opType);
  for (const [name, attr] of Object.entries(node.attrs ?? {})) w.message(5, attributeWriter(name, attr));
  if (node.domain) w.string(7, node.domain);
  return w;
}

/** AttributeProto. */
export function attributeWriter(name: string, attr: AttrValue): ProtoWriter {
  const w = new ProtoWriter();
  w.string(1, name);
  switch (attr.type) {
    case "float":
      w.float(2, attr.value);
      break;
    case "int":
      w.varint(3, attr.value);
      break;
    case "string":
      w.string(4, attr.value);
      break;
    case "tensor":
      w.message(5, tensorWriter(attr.value));
      break;
    case "graph":
      w.message(6, graphWriter(attr.value));
      break;
    case "floats":
      w.packedFloats(7, attr.value);
      break;
    case "ints":
      w.packedVarints(8, attr.value);
      break;
    case "strings":
      for (const s of attr.value) w.string(9, s);
      break;
  }
  w.varint(20, ATTR_TYPE[attr.type]);
  return w;
}

/** TensorProto: raw_data inline, or data_location = EXTERNAL with location/offset/length entries. */
export function tensorWriter(t: TensorData): ProtoWriter {
  if ((t.raw === undefined) === (t.external === undefined)) {
    throw new Error(`tensor ${t.name}: give exactly one of raw bytes or an external reference`);
  }
  const w = new ProtoWriter();
  w.packedVarints(1, t.dims);
  w.varint(2, ONNX_DTYPE[t.dtype]);
  if (t.name) w.string(8, t.name);
  if (t.raw) w.bytes(9, t.raw);
  if (t.external) {
    const ext = t.external;
    w.message(13, entryWriter("location", ext.location));
    w.message(13, entryWriter("offset", String(ext.offset)));
    w.message(13, entryWriter("length", String(ext.length)));
    w.varint(14, EXTERNAL);
  }
  return w;
}

/** ValueInfoProto with a TypeProto.Tensor; dims become dim_value or dim_param. */
export function valueInfoWriter(info: TensorInfo): ProtoWriter {
  const w = new ProtoWriter();
  w.string(1, info.name);
  if (info.dtype === undefined) return w;
  const tensorType = new ProtoWriter().varint(1, ONNX_DTYPE[info.dtype]);
  if (info.dims) tensorType.message(2, shapeWriter(info.dims));
  w.message(2, new ProtoWriter().message(1, tensorType));
  return w;
}

/** TensorShapeProto. A rank-0 shape is an empty message, which is not the same as no shape. */
function shapeWriter(dims: readonly Dim[]): ProtoWriter {
  const w = new ProtoWriter();
  for (const d of dims) {
    const dim = new ProtoWriter();
    if (typeof d === "number") dim.varint(1, d);
    else dim.string(2, d);
    w.message(1, dim);
  }
  return w;
}

/** StringStringEntryProto. */
function entryWriter(key: string, value: string): ProtoWriter {
  return new ProtoWriter().string(1, key).string(2, value);
}
