/**
 * Node attributes: tagged constructors (`attr.float(1)`) and the shorthand `GraphBuilder.op` accepts.
 */

import type { AttrValue, GraphData, TensorData } from "./proto.ts";

/** Anything that can become a graph attribute (a sub-builder). */
export interface GraphSource {
  toGraph(): GraphData;
}

/** Attributes given to `op`: tagged values, or shorthand (see `toAttr`); `undefined` entries are dropped. */
export type AttrMap = Readonly<Record<string, AttrValue | AttrShorthand | undefined>>;

/** Shorthand attribute values: integers → INT(S), other numbers → FLOAT(S), strings → STRING(S). */
export type AttrShorthand = number | bigint | string | readonly number[] | readonly string[] | GraphSource;

/** Tagged attribute constructors, for values the shorthand would misread (a float of 1 is `attr.float(1)`). */
export const attr = {
  float: (value: number): AttrValue => ({ type: "float", value }),
  int: (value: number | bigint): AttrValue => ({ type: "int", value }),
  string: (value: string): AttrValue => ({ type: "string", value }),
  floats: (value: readonly number[]): AttrValue => ({ type: "floats", value }),
  ints: (value: readonly (number | bigint)[]): AttrValue => ({ type: "ints", value }),
  strings: (value: readonly string[]): AttrValue => ({ type: "strings", value }),
  tensor: (value: TensorData): AttrValue => ({ type: "tensor", value }),
  graph: (value: GraphSource | GraphData): AttrValue => ({
    type: "graph",
    value: isGraphSource(value) ? value.toGraph() : value,
  }),
};

/** Tags every attribute and drops the undefined ones. */
export function normalizeAttrs(attrs: AttrMap): Record<string, AttrValue> {
  const out: Record<string, AttrValue> = {};
  for (const [key, value] of Object.entries(attrs)) {
    if (value !== undefined) out[key] = toAttr(value);
  }
  return out;
}

/** One attribute value, tagged; shorthand numbers are INT when integral, else FLOAT. */
export function toAttr(value: AttrValue | AttrShorthand): AttrValue {
  if (typeof value === "bigint") return attr.int(value);
  if (typeof value === "number") return Number.isInteger(value) ? attr.int(value) : attr.float(value);
  if (typeof value === "string") return attr.string(value);
  if (Array.isArray(value)) {
    if (value.every((v) => typeof v === "string")) return attr.strings(value as string[]);
    const nums = value as number[];
    return nums.every(Number.isInteger) ? attr.ints(nums) : attr.floats(nums);
  }
  if (isGraphSource(value)) return attr.graph(value);
  return value as AttrValue;
}

function isGraphSource(value: unknown): value is GraphSource {
  return typeof (value as Partial<GraphSource>).toGraph === "function";
}
