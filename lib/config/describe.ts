/** Human descriptions of field specs, shared by error messages and `--help`. */
import type { Field, FieldSpec } from "./fields.ts";

/** `an integer >= 1`, `a number in (0, 1]`, `one of cpu, webgpu, cuda`, ... */
export function describeSpec(spec: FieldSpec): string {
  switch (spec.kind) {
    case "int":
      return `an integer${describeBounds(spec.min, spec.max, false, false)}`;
    case "float":
      return `a number${describeBounds(spec.min, spec.max, spec.minOpen, spec.maxOpen)}`;
    case "bool":
      return "true or false";
    case "string":
      return spec.allowEmpty ? "a string" : "a non-empty string";
    case "choice":
      return `one of ${spec.choices.join(", ")}`;
    case "list": {
      const notes = [describeLength(spec.minItems, spec.maxItems), spec.unique ? "each at most once" : ""];
      const suffix = notes.filter(Boolean).join(", ");
      return `a list of ${pluralize(describeSpec(spec.item))}${suffix ? ` (${suffix})` : ""}`;
    }
    case "weights":
      return `a mapping of ${spec.names.join(" / ")} to numbers`;
    case "map":
      return `a mapping of names to ${pluralize(describeSpec(spec.value))}`;
    case "records":
      return `a list of mappings with keys ${Object.keys(spec.fields).join(", ")}`;
  }
}

/** As `describeSpec`, plus "or null" for nullable fields. */
export function describeField(field: Field<unknown>): string {
  return describeSpec(field) + (field.nullable ? ", or null" : "");
}

/** The allowed range alone (`(0, 1]`, `>= 1`), for out-of-range messages; empty when unbounded. */
export function describeRange(spec: FieldSpec): string {
  if (spec.kind !== "int" && spec.kind !== "float") return "";
  const open = spec.kind === "float" ? spec : { minOpen: false, maxOpen: false };
  return describeBounds(spec.min, spec.max, open.minOpen, open.maxOpen).trim();
}

function describeBounds(min?: number, max?: number, minOpen?: boolean, maxOpen?: boolean): string {
  if (min !== undefined && max !== undefined) {
    if (min === max) return ` equal to ${min}`;
    return ` in ${minOpen ? "(" : "["}${min}, ${max}${maxOpen ? ")" : "]"}`;
  }
  if (min !== undefined) return ` ${minOpen ? ">" : ">="} ${min}`;
  if (max !== undefined) return ` ${maxOpen ? "<" : "<="} ${max}`;
  return "";
}

function describeLength(min?: number, max?: number): string {
  if (min !== undefined && min === max) return `exactly ${min}`;
  if (min !== undefined && min > 0) return `at least ${min}`;
  return "";
}

/** "an integer >= 1" → "integers >= 1"; "one of a, b" → "items from a, b". */
function pluralize(text: string): string {
  return text
    .replace(/^an integer/, "integers")
    .replace(/^a number/, "numbers")
    .replace(/^a non-empty string/, "non-empty strings")
    .replace(/^a string/, "strings")
    .replace(/^one of /, "items from ");
}

/** A value rendered as YAML-ish text for help and fixes: `null`, `[q, v]`, `{gsm8k: 1}`, `"text"`. */
export function showYaml(value: unknown): string {
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) return `[${value.map(showYaml).join(", ")}]`;
  if (typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    return `{${entries.map(([k, v]) => `${k}: ${showYaml(v)}`).join(", ")}}`;
  }
  if (typeof value === "string") return /^[\w./-]+$/.test(value) ? value : JSON.stringify(value);
  return String(value);
}

/** What a value is, for "expected X, got Y" messages. */
export function typeName(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity || value === -Infinity) return "an infinite number";
  if (typeof value === "number") return Number.isInteger(value) ? "an integer" : "a number";
  if (typeof value === "object") return "a mapping";
  return `a ${typeof value}`;
}
