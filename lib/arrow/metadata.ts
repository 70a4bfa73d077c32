/**
 * Schema metadata of stage files: the keys, their encoding (Arrow metadata values are strings; JSON
 * for objects) and decoding. The writer fills `kind`, `format_version`, `toolkit_version` and
 * `created_at`; the stage supplies the rest (its kind declares which keys it must supply).
 *
 * @module
 */

import { UserError } from "../errors.ts";
import denoJson from "../../deno.json" with { type: "json" };
import { FORMAT_VERSION, isStageKind, KINDS, type StageKind } from "./kinds.ts";

/** The toolkit version recorded in every file (from deno.json). */
export const TOOLKIT_VERSION: string = denoJson.version;

/** Metadata of a stage file, decoded. */
export interface StageMetadata {
  kind: StageKind;
  format_version: number;
  /** Hash of the resolved config that produced the file. */
  config_hash?: string;
  /** sha256 of every input file, by kind (`{"rollouts": "…", "scored": "…"}`). */
  input_hashes?: Record<string, string>;
  /** Base model identity (directory name or hash). */
  model?: string;
  /** Adapter identity (hash), `""` for the base model. */
  adapter?: string;
  tokenizer_hash?: string;
  chat_template_hash?: string;
  /** Sampling parameters (temperature, top_p, max_tokens…). */
  sampling?: Record<string, unknown>;
  seed?: number;
  toolkit_version?: string;
  /** ISO 8601 time the file was written. */
  created_at?: string;
}

/** What a stage passes to the writer (kind and format_version come from the writer). */
export type MetadataInput = Omit<Partial<StageMetadata>, "kind" | "format_version">;

/** Every metadata key, in file order. */
export const METADATA_KEYS = [
  "kind",
  "format_version",
  "config_hash",
  "input_hashes",
  "model",
  "adapter",
  "tokenizer_hash",
  "chat_template_hash",
  "sampling",
  "seed",
  "toolkit_version",
  "created_at",
] as const;

const JSON_KEYS = new Set(["input_hashes", "sampling"]);
const NUMBER_KEYS = new Set(["format_version", "seed"]);

/** Checks a stage's metadata for `kind` and encodes it, adding the writer-filled keys. */
export function encodeMetadata(path: string, kind: StageKind, input: MetadataInput): Map<string, string> {
  const known = new Set<string>(METADATA_KEYS);
  for (const key of Object.keys(input)) {
    if (!known.has(key) || key === "kind" || key === "format_version") {
      throw new UserError(`writing ${path}: metadata key "${key}"`, {
        why: "it is not a stage-file metadata key (kind and format_version are filled by the writer)",
        fix: `use one of ${METADATA_KEYS.slice(2).join(", ")}`,
      });
    }
  }
  for (const key of KINDS[kind].requiredMetadata) {
    if ((input as Record<string, unknown>)[key] === undefined) {
      throw new UserError(`writing ${path}: metadata key "${key}"`, {
        why: `a ${kind} file must record it and the stage did not supply it`,
        fix: `pass ${key} in the metadata argument of writeStageFile`,
      });
    }
  }
  const full: Record<string, unknown> = {
    toolkit_version: TOOLKIT_VERSION,
    created_at: new Date().toISOString(),
    ...input,
    kind,
    format_version: FORMAT_VERSION,
  };
  const out = new Map<string, string>();
  for (const key of METADATA_KEYS) {
    const value = full[key];
    if (value === undefined) continue;
    out.set(key, JSON_KEYS.has(key) ? JSON.stringify(value) : String(value));
  }
  return out;
}

/**
 * Decodes a file's metadata; requires `kind` and `format_version`. Unknown keys are kept as strings
 * (files written by other tools may add their own).
 */
export function decodeMetadata(path: string, raw: Map<string, string>): StageMetadata {
  const out: Record<string, unknown> = {};
  for (const [key, value] of raw) {
    if (JSON_KEYS.has(key)) out[key] = parseJsonKey(path, key, value);
    else if (NUMBER_KEYS.has(key)) out[key] = Number(value);
    else out[key] = value;
  }
  if (!isStageKind(out.kind)) {
    throw new UserError(`stage file ${path}`, {
      value: out.kind ?? null,
      why: 'its schema metadata has no valid "kind", so it was not written by this toolkit\'s stages',
      fix: "pass a file written by a stage (rollouts.arrow, scored.arrow, batch.arrow…)",
    });
  }
  if (!Number.isInteger(out.format_version)) {
    throw new UserError(`stage file ${path}`, {
      value: raw.get("format_version") ?? null,
      why: 'its schema metadata has no integer "format_version"',
      fix: "re-run the stage that wrote it with this toolkit",
    });
  }
  return out as unknown as StageMetadata;
}

function parseJsonKey(path: string, key: string, value: string): unknown {
  try {
    return JSON.parse(value);
  } catch {
    throw new UserError(`stage file ${path}: metadata key "${key}"`, {
      value,
      why: "it is not valid JSON",
      fix: "re-run the stage that wrote it",
    });
  }
}
