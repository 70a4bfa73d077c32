/**
 * `validateConfig(raw)`: walks the schema over a parsed YAML value. Unknown keys are rejected with the
 * valid keys listed, every present value is checked by its field, missing keys take their defaults
 * (so a user's file may hold only what it changes), and then the cross-field rules run.
 */
import { UserError } from "../errors.ts";
import { type Field, isField, type Section } from "./fields.ts";
import { type Config, SCHEMA } from "./schema.ts";
import { checkField, unknownKey } from "./check.ts";
import { checkCrossFields } from "./cross.ts";
import { typeName } from "./describe.ts";

/** Checks a parsed configuration and returns it resolved (every key present). Throws `UserError`. */
export function validateConfig(raw: unknown): Config {
  const config = checkSection(SCHEMA, raw ?? {}, "") as Config;
  checkCrossFields(config);
  return config;
}

/** The configuration made of the schema's defaults alone. */
export function defaultConfig(): Config {
  return validateConfig({});
}

function checkSection(section: Section, raw: unknown, prefix: string): Record<string, unknown> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    const where = prefix || "the configuration";
    throw new UserError(`config: ${where}`, {
      value: raw,
      why: `expected a mapping of keys (${Object.keys(section).join(", ")}), got ${typeName(raw)}`,
      fix: `write ${prefix ? `${prefix} as a mapping with indented keys` : "the file as `section:` blocks"}`,
    });
  }
  const given = raw as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    // Own keys only: `key in` would take Object.prototype's names (__proto__, constructor, toString) as keys.
    if (!Object.hasOwn(section, key)) {
      throw unknownKey(join(prefix, key), Object.keys(section), keysNamed(key));
    }
  }
  const out: Record<string, unknown> = {};
  for (const [key, node] of Object.entries(section)) {
    const path = join(prefix, key);
    if (isField(node)) {
      out[key] = Object.hasOwn(given, key) ? checkField(node, given[key], path) : copy(node.default);
    } else out[key] = checkSection(node, Object.hasOwn(given, key) ? given[key] ?? {} : {}, path);
  }
  return out;
}

/** Full paths of every schema key, in declaration order (`model.path`, `rollout.tools.enabled`, ...). */
export function schemaPaths(section: Section = SCHEMA, prefix = ""): string[] {
  return Object.entries(section).flatMap(([key, node]) =>
    isField(node) ? [join(prefix, key)] : schemaPaths(node, join(prefix, key))
  );
}

/** The field at a dotted path, or undefined. */
export function fieldAt(path: string): Field<unknown> | undefined {
  let node: Field<unknown> | Section = SCHEMA;
  for (const key of path.split(".")) {
    if (isField(node) || !Object.hasOwn(node, key)) return undefined;
    node = node[key];
  }
  return isField(node) ? node : undefined;
}

/** Paths elsewhere in the schema whose last key is `key`: a key put in the wrong section. */
export function keysNamed(key: string): string[] {
  return schemaPaths().filter((path) => path === key || path.endsWith(`.${key}`));
}

function join(prefix: string, key: string): string {
  return prefix ? `${prefix}.${key}` : key;
}

function copy<T>(value: T): T {
  return value === null || typeof value !== "object" ? value : structuredClone(value);
}
