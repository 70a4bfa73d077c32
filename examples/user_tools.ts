/**
 * A user tool module: name it in config and the rollout offers its tools beside the built-ins.
 *
 *   rollout:
 *     tools:
 *       modules: [examples/user_tools.ts]
 *
 * A module exports `tools` (or a default export): each tool has a name, a description, a JSON schema
 * of its arguments (the subset of lib/tools/schema.ts) and an async `run`. `run` receives arguments
 * already checked against the schema; it returns a string, or `{ status, output }` to report a failure
 * the model should see (`tool_error`). It should stop when `ctx.signal` aborts (the call's time is up).
 * Throw only for faults of the machine (an InfrastructureError stops the stage).
 *
 * Try it: `deno run examples/user_tools.ts 3.5 mi km`
 *
 * @module
 */

import type { Tool, ToolResult } from "../lib/tools/types.ts";

/** Metres, kilograms or seconds per unit, by dimension. */
const UNITS: Record<string, { dimension: string; factor: number }> = {
  mm: { dimension: "length", factor: 0.001 },
  cm: { dimension: "length", factor: 0.01 },
  m: { dimension: "length", factor: 1 },
  km: { dimension: "length", factor: 1000 },
  in: { dimension: "length", factor: 0.0254 },
  ft: { dimension: "length", factor: 0.3048 },
  mi: { dimension: "length", factor: 1609.344 },
  g: { dimension: "mass", factor: 0.001 },
  kg: { dimension: "mass", factor: 1 },
  lb: { dimension: "mass", factor: 0.45359237 },
  s: { dimension: "time", factor: 1 },
  min: { dimension: "time", factor: 60 },
  h: { dimension: "time", factor: 3600 },
};

export const unitConvert: Tool = {
  name: "unit_convert",
  description:
    "Convert a quantity between units of length, mass or time (mm cm m km in ft mi g kg lb s min h).",
  parameters: {
    type: "object",
    properties: {
      value: { type: "number", description: "the quantity to convert" },
      from: { type: "string", enum: Object.keys(UNITS), description: "unit of value" },
      to: { type: "string", enum: Object.keys(UNITS), description: "unit wanted" },
    },
    required: ["value", "from", "to"],
    additionalProperties: false,
  },
  run(args): Promise<string | ToolResult> {
    const from = UNITS[args.from as string];
    const to = UNITS[args.to as string];
    if (from === undefined || to === undefined) {
      return Promise.resolve({
        status: "tool_error",
        output: `Error: units are ${Object.keys(UNITS).join(" ")}`,
      });
    }
    if (from.dimension !== to.dimension) {
      return Promise.resolve({
        status: "tool_error",
        output: `Error: cannot convert ${from.dimension} (${args.from}) to ${to.dimension} (${args.to})`,
      });
    }
    const result = (args.value as number) * from.factor / to.factor;
    return Promise.resolve(`${Number(result.toPrecision(12))} ${args.to}`);
  },
};

export const tools: Tool[] = [unitConvert];

if (import.meta.main) {
  const [value, from, to] = Deno.args.length === 3 ? Deno.args : ["3.5", "mi", "km"];
  const ctx = { signal: new AbortController().signal } as Parameters<Tool["run"]>[1];
  console.log(await unitConvert.run({ value: Number(value), from, to }, ctx));
}
