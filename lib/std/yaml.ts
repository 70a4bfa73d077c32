/**
 * Stand-in for `jsr:@std/yaml`: JSR is unreachable from our machines, so YAML goes through `npm:yaml`
 * behind the same two names. Swapping back is a change to this one file.
 */
import YAML from "yaml";

/** Parses one YAML document; duplicate keys are an error (as in @std/yaml). */
export function parse(text: string): unknown {
  return YAML.parse(text, { uniqueKeys: true, prettyErrors: true });
}

/** Serializes a value as YAML. */
export function stringify(value: unknown): string {
  return YAML.stringify(value, { lineWidth: 0 });
}
