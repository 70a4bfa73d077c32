/**
 * Tool arguments against the JSON schema subset: one message per failure with path, expected and
 * actual; and the checks on a tool's own schema.
 */
import assert from "node:assert/strict";
import { describeArguments, validateArguments, validateSchemaDefinition } from "../../lib/tools/schema.ts";

const CALC = {
  type: "object",
  description: "Evaluate an arithmetic expression.",
  properties: {
    expression: { type: "string", minLength: 1, maxLength: 8, description: "e.g. 2+2" },
    precision: { type: "integer", minimum: 0, maximum: 10 },
    mode: { type: "string", enum: ["exact", "float"] },
    tags: { type: "array", items: { type: "string" } },
    note: { type: ["string", "null"] },
  },
  required: ["expression"],
  additionalProperties: false,
};

Deno.test("validateArguments() accepts conforming arguments", () => {
  assert.deepEqual(validateArguments(CALC, { expression: "2+2" }), []);
  assert.deepEqual(
    validateArguments(CALC, { expression: "1", precision: 3, mode: "exact", tags: ["a"], note: null }),
    [],
  );
});

Deno.test("validateArguments() names path, expected and actual for a wrong type", () => {
  assert.deepEqual(validateArguments(CALC, { expression: 2 }), [
    "arguments.expression: expected string, got integer 2",
  ]);
  assert.deepEqual(validateArguments(CALC, { expression: "1", precision: 1.5 }), [
    "arguments.precision: expected integer, got number 1.5",
  ]);
  assert.deepEqual(validateArguments(CALC, { expression: "1", tags: ["a", 3] }), [
    "arguments.tags[1]: expected string, got integer 3",
  ]);
  assert.deepEqual(validateArguments(CALC, { expression: "1", note: 5 }), [
    "arguments.note: expected string or null, got integer 5",
  ]);
  assert.deepEqual(validateArguments(CALC, "2+2"), ['arguments: expected object, got string "2+2"']);
});

Deno.test("validateArguments() reports required, additional, enum and bounds, one message each", () => {
  const errors = validateArguments(CALC, {
    precision: 11,
    mode: "fuzzy",
    "bad key": 1,
  });
  assert.deepEqual(errors, [
    "arguments.expression: required (string) but missing",
    "arguments.precision: expected a number <= 10, got 11",
    'arguments.mode: expected one of "exact", "float", got string "fuzzy"',
    'arguments["bad key"]: unexpected property (allowed: expression, precision, mode, tags, note)',
  ]);
  assert.deepEqual(validateArguments(CALC, { expression: "" }), [
    "arguments.expression: expected at least 1 characters, got 0",
  ]);
  // Lengths count code points: eight emoji are 16 UTF-16 units but 8 characters.
  assert.deepEqual(validateArguments(CALC, { expression: "😀".repeat(8) }), []);
  assert.equal(validateArguments(CALC, { expression: "😀".repeat(9) }).length, 1);
});

Deno.test("validateArguments() sees only own properties of null-prototype arguments", () => {
  const args = Object.create(null);
  args.__proto__ = "x"; // a plain key on a null-prototype object
  assert.deepEqual(validateArguments({ type: "object", required: ["toString"] }, args), [
    "arguments.toString: required but missing",
  ]);
  assert.deepEqual(validateArguments({ type: "object", additionalProperties: false }, args), [
    "arguments.__proto__: unexpected property (allowed: none)",
  ]);
});

Deno.test("describeArguments() pictures a tool's parameters in one line", () => {
  assert.equal(
    describeArguments(CALC),
    '{"expression": string, "precision" (optional): integer, "mode" (optional): "exact" | "float", ' +
      '"tags" (optional): array, "note" (optional): string | null}',
  );
});

Deno.test("validateSchemaDefinition() accepts the subset and rejects what it would ignore", () => {
  assert.deepEqual(validateSchemaDefinition(CALC), []);
  assert.deepEqual(validateSchemaDefinition({ type: "string" }), [
    'parameters.type: must be "object" (tool arguments are a JSON object), got "string"',
  ]);
  const errors = validateSchemaDefinition({
    type: "object",
    properties: {
      a: { type: "text" },
      b: { type: "string", pattern: "^x" },
      c: { type: "integer", minimum: 5, maximum: 1 },
      d: { type: "string", minLength: -1 },
      e: { enum: [] },
      f: { type: "array", items: "string" },
    },
    required: ["a", "zzz"],
    additionalProperties: { type: "string" },
  });
  assert.deepEqual(errors, [
    "parameters.properties.a.type: expected one of object, string, number, integer, boolean, array, null " +
    'or a list of them, got "text"',
    "parameters.properties.b.pattern: unsupported keyword (supported: type, properties, required, " +
    "additionalProperties, enum, items, minimum, maximum, minLength, maxLength)",
    "parameters.properties.c: minimum 5 is above maximum 1",
    "parameters.properties.d.minLength: got -1, which is not a valid bound",
    "parameters.properties.e.enum: must be a non-empty array, got []",
    'parameters.properties.f.items: a schema must be an object, got "string"',
    'parameters.required: names "zzz", which is not in properties',
    'parameters.additionalProperties: only true or false is supported, got {"type":"string"}',
  ]);
  assert.deepEqual(validateSchemaDefinition(null), ["parameters: a schema must be an object, got null"]);
});
