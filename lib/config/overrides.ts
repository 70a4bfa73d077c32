/**
 * Command-line overrides: `--section.key=value` (`--train.lora.r=8`, `--train.lora.targets=[q,v]`,
 * `--score.rewards.format=0.2`). The value is parsed as YAML (a scalar or a flow list / mapping), then
 * checked against the key's field; an unknown path lists the valid keys at that level.
 */
import { parse } from "@std/yaml";
import { UserError } from "../errors.ts";
import { type Field, isField, type Section } from "./fields.ts";
import { type Config, SCHEMA } from "./schema.ts";
import { checkField, unknownKey } from "./check.ts";
import { keysNamed } from "./validate.ts";

/** Returns a new configuration with the overrides applied in order; `config` is not changed. */
export function applyOverrides(config: Config, overrides: ReadonlyArray<readonly [string, string]>): Config {
  const out = structuredClone(config) as unknown as Record<string, unknown>;
  for (const [path, text] of overrides) applyOne(out, path, text);
  return out as unknown as Config;
}

function applyOne(root: Record<string, unknown>, path: string, text: string): void {
  const keys = path.split(".");
  let section: Section = SCHEMA;
  let parent = root;
  for (let i = 0; i < keys.length; i++) {
    const [key, here, rest] = [keys[i], keys.slice(0, i + 1).join("."), keys.slice(i + 1)];
    // Own keys only: `key in` would take Object.prototype's names (__proto__, toString) as sections.
    if (!Object.hasOwn(section, key)) throw unknownKey(here, Object.keys(section), keysNamed(key));
    const node = section[key];
    if (!isField(node)) {
      if (rest.length === 0) throw isASection(here, node);
      [section, parent] = [node, parent[key] as Record<string, unknown>];
      continue;
    }
    if (rest.length === 0) parent[key] = checkField(node, parseValue(node, text, here), here);
    // Only a weights mapping has names below a key: `--score.rewards.format=0.2`.
    else if (node.kind === "weights" && rest.length === 1) {
      parent[key] = setWeight(node, parent[key], here, rest[0], text);
    } else throw notASection(here);
    return;
  }
}

/** One entry of a weights mapping changed, then the whole mapping checked. */
function setWeight(
  field: Field<unknown>,
  current: unknown,
  path: string,
  name: string,
  text: string,
): unknown {
  const next = { ...(current as Record<string, unknown>), [name]: parseYaml(text, `${path}.${name}`) };
  return checkField(field, next, path);
}

/**
 * YAML-parses the text, but a string field takes the text as typed unless it is quoted (`--model.path=123`
 * is the directory "123"; YAML would also drop a ` #…` tail as a comment, `--data.system_prompt="Answer
 * after #### then stop"`, and read a leading `#` as null), or a YAML null for a nullable field.
 */
function parseValue(field: Field<unknown>, text: string, path: string): unknown {
  if (field.kind === "string") {
    if (field.nullable && /^\s*(null|Null|NULL|~)?\s*$/.test(text)) return null;
    if (!/^\s*["']/.test(text)) return text;
    const quoted = parseYaml(text, path);
    return typeof quoted === "string" ? quoted : text;
  }
  const value = parseYaml(text, path);
  const wantsString = field.kind === "list" && field.item.kind === "string";
  if (!wantsString || (value === null && field.nullable)) return value;
  return Array.isArray(value) ? value.map((item) => typeof item === "string" ? item : String(item)) : value;
}

function parseYaml(text: string, path: string): unknown {
  try {
    return parse(text);
  } catch (error) {
    throw new UserError(`override --${path}`, {
      value: text,
      why: `not a valid YAML value (${firstLine(error)})`,
      fix: `quote the value or write a list as --${path}=[a,b]`,
    });
  }
}

function isASection(path: string, section: Section): UserError {
  return new UserError(`override --${path}`, {
    why: `${path} is a section, not a key; its keys: ${Object.keys(section).join(", ")}`,
    fix: `override one key at a time, e.g. --${path}.${Object.keys(section)[0]}=VALUE`,
  });
}

function notASection(path: string): UserError {
  return new UserError(`override --${path}`, {
    why: `${path} is a key and has no keys below it`,
    fix: `write --${path}=VALUE`,
  });
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split("\n")[0].replace(/[.:]\s*$/, "");
}
