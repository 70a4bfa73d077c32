/** `configHash`: the identity of a resolved configuration, written into every stage file's metadata. */
import { createHash } from "node:crypto";
import type { Config } from "./schema.ts";

/** sha256 (hex) of the canonical JSON of the configuration: the same values give the same hash in any key order. */
export function configHash(config: Config): string {
  return createHash("sha256").update(canonicalJson(config)).digest("hex");
}

/** JSON with object keys sorted at every level and no whitespace. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}
