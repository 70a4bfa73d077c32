/**
 * Tool arguments against a JSON schema, in the subset tools need:
 * `type` (object, string, number, integer, boolean, array, null; or a list of them), `properties`,
 * `required`, `additionalProperties: false`, `enum`, `items`, `minimum` / `maximum`,
 * `minLength` / `maxLength` (in code points, as JSON Schema counts). Annotations (`description`,
 * `title`, `default`, `examples`, `$schema`, `$comment`) are allowed and ignored.
 *
 * `validateArguments` returns one message per failure naming the path, what was expected and what was
 * there; the rollout shows them to the model. `validateSchemaDefinition` checks a tool's own schema
 * (user tool modules), so a keyword outside the subset is an error instead of a silently ignored rule.
 *
 * @module
 */

import type { JsonSchema } from "./types.ts";

export const SCHEMA_TYPES = ["object", "string", "number", "integer", "boolean", "array", "null"] as const;
type SchemaType = typeof SCHEMA_TYPES[number];

const RULE_KEYWORDS = [
  "type",
  "properties",
  "required",
  "additionalProperties",
  "enum",
  "items",
  "minimum",
  "maximum",
  "minLength",
  "maxLength",
];
const ANNOTATION_KEYWORDS = ["description", "title", "default", "examples", "$schema", "$comment"];

/** Every failure of `value` against `schema`, one message each; empty when it conforms. */
export function validateArguments(schema: JsonSchema, value: unknown, path = "arguments"): string[] {
  const errors: string[] = [];
  check(schema, value, path, errors);
  return errors;
}

function check(schema: JsonSchema, value: unknown, path: string, errors: string[]): void {
  const types = typesOf(schema);
  if (types.length > 0 && !types.some((type) => matchesType(type, value))) {
    errors.push(`${path}: expected ${types.join(" or ")}, got ${describeValue(value)}`);
    return; // the remaining rules assume the type
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((option) => sameJson(option, value))) {
    const options = schema.enum.map((option) => JSON.stringify(option)).join(", ");
    errors.push(`${path}: expected one of ${options}, got ${describeValue(value)}`);
  }
  if (typeof value === "number") checkNumber(schema, value, path, errors);
  if (typeof value === "string") checkString(schema, value, path, errors);
  if (Array.isArray(value)) checkArray(schema, value, path, errors);
  else if (isPlainObject(value)) checkObject(schema, value, path, errors);
}

function checkNumber(schema: JsonSchema, value: number, path: string, errors: string[]): void {
  if (typeof schema.minimum === "number" && value < schema.minimum) {
    errors.push(`${path}: expected a number >= ${schema.minimum}, got ${value}`);
  }
  if (typeof schema.maximum === "number" && value > schema.maximum) {
    errors.push(`${path}: expected a number <= ${schema.maximum}, got ${value}`);
  }
}

function checkString(schema: JsonSchema, value: string, path: string, errors: string[]): void {
  const length = [...value].length;
  if (typeof schema.minLength === "number" && length < schema.minLength) {
    errors.push(`${path}: expected at least ${schema.minLength} characters, got ${length}`);
  }
  if (typeof schema.maxLength === "number" && length > schema.maxLength) {
    errors.push(`${path}: expected at most ${schema.maxLength} characters, got ${length}`);
  }
}

function checkArray(schema: JsonSchema, value: unknown[], path: string, errors: string[]): void {
  if (!isPlainObject(schema.items)) return;
  value.forEach((item, i) => check(schema.items as JsonSchema, item, `${path}[${i}]`, errors));
}

function checkObject(
  schema: JsonSchema,
  value: Record<string, unknown>,
  path: string,
  errors: string[],
): void {
  const properties = isPlainObject(schema.properties) ? schema.properties as Record<string, JsonSchema> : {};
  const required = Array.isArray(schema.required) ? schema.required as string[] : [];
  for (const key of required) {
    if (!Object.hasOwn(value, key)) {
      const type = Object.hasOwn(properties, key) ? typesOf(properties[key]).join(" or ") : "";
      errors.push(`${memberPath(path, key)}: required${type ? ` (${type})` : ""} but missing`);
    }
  }
  for (const key of Object.keys(value)) {
    if (Object.hasOwn(properties, key)) check(properties[key], value[key], memberPath(path, key), errors);
    else if (schema.additionalProperties === false) {
      const allowed = Object.keys(properties).join(", ") || "none";
      errors.push(`${memberPath(path, key)}: unexpected property (allowed: ${allowed})`);
    }
  }
}

/** The schema's types as a list (empty when it has no `type`). */
function typesOf(schema: JsonSchema): SchemaType[] {
  const type = schema.type;
  if (typeof type === "string") return [type as SchemaType];
  return Array.isArray(type) ? type as SchemaType[] : [];
}

function matchesType(type: SchemaType, value: unknown): boolean {
  switch (type) {
    case "object":
      return isPlainObject(value);
    case "array":
      return Array.isArray(value);
    case "null":
      return value === null;
    case "integer":
      return Number.isInteger(value);
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "string":
      return typeof value === "string";
    case "boolean":
      return typeof value === "boolean";
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  return typeof a === "object" && typeof b === "object" && JSON.stringify(a) === JSON.stringify(b);
}

/** `integer 3`, `string "abc"`, `object`, for messages. */
function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "object") return "object";
  const shown = JSON.stringify(value) ?? String(value);
  const short = shown.length > 40 ? `${shown.slice(0, 37)}...` : shown;
  const type = Number.isInteger(value) ? "integer" : typeof value;
  return `${type} ${short}`;
}

function memberPath(path: string, key: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

/** A one-line picture of what a tool takes, for error messages: `{"expression": string}`. */
export function describeArguments(schema: JsonSchema): string {
  const properties = isPlainObject(schema.properties) ? schema.properties as Record<string, JsonSchema> : {};
  const required = new Set(Array.isArray(schema.required) ? schema.required as string[] : []);
  const parts = Object.entries(properties).map(([key, sub]) => {
    const type = Array.isArray(sub.enum)
      ? sub.enum.map((option) => JSON.stringify(option)).join(" | ")
      : typesOf(sub).join(" | ") || "any";
    return `${JSON.stringify(key)}${required.has(key) ? "" : " (optional)"}: ${type}`;
  });
  return `{${parts.join(", ")}}`;
}

/**
 * Problems with a tool's parameter schema, one message each; empty when it is usable. The root must
 * be `type: "object"` (tool arguments are an object).
 */
export function validateSchemaDefinition(schema: unknown, path = "parameters"): string[] {
  const errors: string[] = [];
  if (isPlainObject(schema) && schema.type !== "object") {
    errors.push(
      `${path}.type: must be "object" (tool arguments are a JSON object), got ${show(schema.type)}`,
    );
  }
  checkDefinition(schema, path, errors);
  return errors;
}

function show(value: unknown): string {
  return JSON.stringify(value) ?? String(value);
}

function checkDefinition(schema: unknown, path: string, errors: string[]): void {
  if (!isPlainObject(schema)) {
    errors.push(`${path}: a schema must be an object, got ${show(schema)}`);
    return;
  }
  for (const key of Object.keys(schema)) {
    if (!RULE_KEYWORDS.includes(key) && !ANNOTATION_KEYWORDS.includes(key)) {
      errors.push(`${path}.${key}: unsupported keyword (supported: ${RULE_KEYWORDS.join(", ")})`);
    }
  }
  checkTypeKeyword(schema.type, path, errors);
  checkMembers(schema, path, errors);
  if ("enum" in schema && !(Array.isArray(schema.enum) && schema.enum.length > 0)) {
    errors.push(`${path}.enum: must be a non-empty array, got ${show(schema.enum)}`);
  }
  if ("items" in schema) checkDefinition(schema.items, `${path}.items`, errors);
  checkBounds(schema, "minimum", "maximum", (v) => Number.isFinite(v), path, errors);
  checkBounds(schema, "minLength", "maxLength", (v) => Number.isInteger(v) && v >= 0, path, errors);
}

function checkTypeKeyword(type: unknown, path: string, errors: string[]): void {
  if (type === undefined) return;
  const list = Array.isArray(type) ? type : [type];
  const known = (t: unknown) => (SCHEMA_TYPES as readonly unknown[]).includes(t);
  if (list.length === 0 || !list.every(known) || new Set(list).size !== list.length) {
    errors.push(
      `${path}.type: expected one of ${SCHEMA_TYPES.join(", ")} or a list of them, got ${show(type)}`,
    );
  }
}

function checkMembers(schema: Record<string, unknown>, path: string, errors: string[]): void {
  const { properties, required, additionalProperties } = schema;
  if (properties !== undefined) {
    if (!isPlainObject(properties)) errors.push(`${path}.properties: must be an object of schemas`);
    else {
      for (const [key, sub] of Object.entries(properties)) {
        checkDefinition(sub, `${path}.properties.${key}`, errors);
      }
    }
  }
  if (required !== undefined) {
    if (!Array.isArray(required) || !required.every((key) => typeof key === "string")) {
      errors.push(`${path}.required: must be an array of property names, got ${show(required)}`);
    } else if (isPlainObject(properties)) {
      for (const key of required.filter((key) => !Object.hasOwn(properties, key))) {
        errors.push(`${path}.required: names ${JSON.stringify(key)}, which is not in properties`);
      }
    }
  }
  if (additionalProperties !== undefined && typeof additionalProperties !== "boolean") {
    errors.push(
      `${path}.additionalProperties: only true or false is supported, got ${show(additionalProperties)}`,
    );
  }
}

function checkBounds(
  schema: Record<string, unknown>,
  low: string,
  high: string,
  valid: (value: number) => boolean,
  path: string,
  errors: string[],
): void {
  for (const key of [low, high]) {
    const value = schema[key];
    if (value !== undefined && !(typeof value === "number" && valid(value))) {
      errors.push(`${path}.${key}: got ${show(value)}, which is not a valid bound`);
    }
  }
  const [min, max] = [schema[low], schema[high]];
  if (typeof min === "number" && typeof max === "number" && min > max) {
    errors.push(`${path}: ${low} ${min} is above ${high} ${max}`);
  }
}
