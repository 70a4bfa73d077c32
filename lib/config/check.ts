/**
 * Checks one value against its field: type, range, choices. Every failure is a one-line `UserError`
 * that names the key, the value, what was expected and how to fix it.
 */
import { UserError } from "../errors.ts";
import type { Field, FieldSpec } from "./fields.ts";
import { describeRange, describeSpec, showYaml, typeName } from "./describe.ts";
import { closest } from "./suggest.ts";

/** Returns the checked value (lists and mappings copied), or throws a `UserError` naming `path`. */
export function checkField(field: Field<unknown>, value: unknown, path: string): unknown {
  if (value === null) {
    if (field.nullable) return null;
    throw wrongType(path, value, describeSpec(field), field.default);
  }
  return checkSpec(field, value, path, field.default);
}

/** `example` is a valid value shown in fixes (the field's default; none for list items). */
function checkSpec(spec: FieldSpec, value: unknown, path: string, example: unknown): unknown {
  switch (spec.kind) {
    case "int":
    case "float":
      return checkNumber(spec, value, path, example);
    case "bool":
      if (typeof value !== "boolean") throw wrongType(path, value, "true or false", example);
      return value;
    case "string":
      return checkString(spec, value, path, example);
    case "choice":
      return checkChoice(spec, value, path);
    case "list":
      return checkList(spec, value, path, example);
    case "weights":
      return checkWeights(spec, value, path, example);
    case "map":
      return checkMap(spec, value, path, example);
    case "records":
      return checkRecords(spec, value, path, example);
  }
}

function checkMap(
  spec: FieldSpec & { kind: "map" },
  value: unknown,
  path: string,
  example: unknown,
): Record<string, unknown> {
  if (!isMapping(value)) throw wrongType(path, value, describeSpec(spec), example);
  const out: Record<string, unknown> = {};
  for (const [name, item] of Object.entries(value)) {
    out[name] = checkSpec(spec.value, item, `${path}.${name}`, undefined);
  }
  return out;
}

/** Each item a mapping of the record's keys: unknown keys refused, required ones present, the rest default. */
function checkRecords(
  spec: FieldSpec & { kind: "records" },
  value: unknown,
  path: string,
  example: unknown,
): Record<string, unknown>[] {
  if (!Array.isArray(value)) throw wrongType(path, value, describeSpec(spec), example);
  return value.map((item, i) => {
    const at = `${path}[${i}]`;
    const keys = Object.keys(spec.fields);
    if (!isMapping(item)) {
      throw wrongType(at, item, `a mapping with keys ${keys.join(", ")}`, undefined);
    }
    for (const key of Object.keys(item)) {
      if (!Object.hasOwn(spec.fields, key)) throw unknownKey(`${at}.${key}`, keys);
    }
    const missing = spec.required.find((key) => !Object.hasOwn(item, key));
    if (missing !== undefined) {
      throw new UserError(`config key ${at}.${missing}`, {
        why: `missing: every entry of ${path} needs ${spec.required.join(" and ")}`,
        fix: `add ${missing}: ... to entry ${i} of ${path} (${spec.fields[missing].doc})`,
      });
    }
    const out: Record<string, unknown> = {};
    for (const [key, field] of Object.entries(spec.fields)) {
      out[key] = Object.hasOwn(item, key)
        ? checkField(field, item[key], `${at}.${key}`)
        : structuredClone(field.default);
    }
    return out;
  });
}

/** A YAML mapping: an object that is not an array. */
export function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function checkNumber(
  spec: FieldSpec & { kind: "int" | "float" },
  value: unknown,
  path: string,
  example: unknown,
): number {
  const isNumber = typeof value === "number" && Number.isFinite(value);
  if (!isNumber || (spec.kind === "int" && !Number.isSafeInteger(value))) {
    throw wrongType(path, value, describeSpec(spec), example);
  }
  const open = spec.kind === "float" ? spec : { minOpen: false, maxOpen: false };
  const low = spec.min !== undefined && (open.minOpen ? value <= spec.min : value < spec.min);
  const high = spec.max !== undefined && (open.maxOpen ? value >= spec.max : value > spec.max);
  if (low || high) {
    const range = describeRange(spec);
    throw new UserError(`config key ${path}`, {
      value,
      why: `out of range: allowed ${range}`,
      fix: `set ${path} to a value ${range}${suggestDefault(example)}`,
    });
  }
  return value;
}

function checkString(
  spec: FieldSpec & { kind: "string" },
  value: unknown,
  path: string,
  example: unknown,
): string {
  if (typeof value !== "string") throw wrongType(path, value, "a string", example);
  if (!spec.allowEmpty && value.trim() === "") {
    throw new UserError(`config key ${path}`, {
      value,
      why: "must not be empty",
      fix: `set ${path} to a non-empty string${suggestDefault(example)}`,
    });
  }
  return value;
}

function checkChoice(spec: FieldSpec & { kind: "choice" }, given: unknown, path: string): string {
  const { choices, retired } = spec;
  // YAML reads true and false as booleans: a choice spelled so takes them (model.merge_adapter).
  const value = typeof given === "boolean" ? String(given) : given;
  if (typeof value === "string" && choices.includes(value)) return value;
  if (typeof value === "string" && retired && Object.hasOwn(retired, value)) {
    throw new UserError(`config key ${path}`, {
      value,
      why: `${value} is no longer a choice of ${path}; valid: ${choices.join(", ")}`,
      fix: retired[value],
    });
  }
  const guess = typeof value === "string" ? closest(value, choices) : undefined;
  throw new UserError(`config key ${path}`, {
    value,
    why: `not a valid choice; valid: ${choices.join(", ")}${guess ? ` (did you mean ${guess}?)` : ""}`,
    fix: `set ${path} to one of ${choices.join(", ")}`,
  });
}

function checkList(
  spec: FieldSpec & { kind: "list" },
  value: unknown,
  path: string,
  example: unknown,
): unknown[] {
  if (!Array.isArray(value)) throw wrongType(path, value, describeSpec(spec), example);
  const tooShort = spec.minItems !== undefined && value.length < spec.minItems;
  const tooLong = spec.maxItems !== undefined && value.length > spec.maxItems;
  if (tooShort || tooLong) {
    throw new UserError(`config key ${path}`, {
      value,
      why: `wrong number of items (${value.length}); expected ${describeSpec(spec)}`,
      fix: `set ${path} to a list such as ${showYaml(example)}`,
    });
  }
  const items = value.map((item, i) => checkSpec(spec.item, item, `${path}[${i}]`, undefined));
  const repeated = items.find((item, i) => items.indexOf(item) !== i);
  if (spec.unique && repeated !== undefined) {
    throw new UserError(`config key ${path}`, {
      value,
      why: `${showYaml(repeated)} is listed twice`,
      fix: `list each item of ${path} once`,
    });
  }
  return items;
}

function checkWeights(
  spec: FieldSpec & { kind: "weights" },
  value: unknown,
  path: string,
  example: unknown,
): Record<string, number> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw wrongType(path, value, describeSpec(spec), example);
  }
  const out: Record<string, number> = {};
  for (const [name, weight] of Object.entries(value)) {
    if (!spec.names.includes(name)) throw unknownKey(`${path}.${name}`, spec.names);
    if (typeof weight !== "number" || !Number.isFinite(weight)) {
      throw wrongType(`${path}.${name}`, weight, "a number", 1.0);
    }
    out[name] = weight;
  }
  if (Object.keys(out).length < (spec.minEntries ?? 0)) {
    throw new UserError(`config key ${path}`, {
      value,
      why: `needs at least ${spec.minEntries} entr${spec.minEntries === 1 ? "y" : "ies"}`,
      fix: `set ${path} to a mapping such as ${showYaml(example)}`,
    });
  }
  return out;
}

/** "expected X, got Y" with a fix that names the key and a valid example. */
export function wrongType(path: string, value: unknown, expected: string, example: unknown): UserError {
  return new UserError(`config key ${path}`, {
    value,
    why: `wrong type: expected ${expected}, got ${typeName(value)}`,
    fix: `set ${path} to ${expected}${example === undefined ? "" : `, e.g. ${showYaml(example)}`}`,
  });
}

/** An unknown key: the valid keys at that level, and the closest one if the name looks like a typo. */
export function unknownKey(path: string, valid: readonly string[], elsewhere: string[] = []): UserError {
  const name = path.slice(path.lastIndexOf(".") + 1);
  const parent = path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "the top level";
  const guess = closest(name, valid);
  const suggestion = guess
    ? `rename it to ${path.replace(/[^.]+$/, guess)}`
    : elsewhere.length > 0
    ? `use ${elsewhere.join(" or ")} instead (the key belongs to another section)`
    : `remove it or use one of the valid keys`;
  return new UserError(`config: unknown key ${path}`, {
    why: `valid keys in ${parent}: ${valid.join(", ")}${guess ? ` (did you mean ${guess}?)` : ""}`,
    fix: suggestion,
  });
}

function suggestDefault(example: unknown): string {
  return ` (default ${showYaml(example)})`;
}
