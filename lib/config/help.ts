/** `configHelp()`: every key with its type, default and doc, for the stages' `--help`. */
import { isField, type Section } from "./fields.ts";
import { SCHEMA } from "./schema.ts";
import { describeField, showYaml } from "./describe.ts";

/**
 * The key listing, two lines per key:
 *
 * ```
 *   rollout.generation.temperature = 1    (a number in (0, 10])
 *       sampling temperature; log-probs are computed at the same temperature
 * ```
 */
export function configHelp(section: Section = SCHEMA, prefix = "", required: readonly string[] = []): string {
  const lines: string[] = [];
  for (const [key, node] of Object.entries(section)) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (!isField(node)) {
      lines.push(configHelp(node, path));
      continue;
    }
    const value = required.includes(key) ? "" : ` = ${showYaml(node.default)}`;
    const kind = `${required.includes(key) ? "required: " : ""}${describeField(node)}`;
    lines.push(`  ${path}${value}    (${kind})`, `      ${node.doc}`);
    // A list of records: each entry's keys, as `path[].key`.
    if (node.kind === "records") lines.push(configHelp(node.fields, `${path}[]`, node.required));
  }
  return lines.join("\n");
}
