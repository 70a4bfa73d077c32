/**
 * "All input columns plus mine": how a stage builds its output from its input file. The input's
 * columns are carried as Arrow vectors (no re-encoding; the writer reuses their buffers), and a stage
 * may not overwrite a column that another stage owns.
 *
 * @module
 */

import { UserError } from "../errors.ts";
import type { ColumnInput } from "./build.ts";
import { findColumn, resolveKind, type StageKind } from "./kinds.ts";
import type { MetadataInput } from "./metadata.ts";
import type { StageFile } from "./stage_file.ts";

/**
 * The columns of a `kind` file made from `input` plus `own`: every input column that `kind` declares
 * (or matches by pattern) and the stage's own columns. An own column may replace an input column only
 * when the writing stage owns it (re-running a stage over its own output); otherwise a UserError.
 * Input columns that `kind` does not declare are not carried.
 */
export function appendColumns(
  input: StageFile,
  kind: StageKind,
  own: Record<string, ColumnInput>,
): Record<string, ColumnInput> {
  const decl = resolveKind(kind);
  const out: Record<string, ColumnInput> = {};
  for (const name of input.columnNames) {
    if (findColumn(decl, name)) out[name] = input.vector(name);
  }
  for (const [name, value] of Object.entries(own)) {
    const owner = findColumn(decl, name)?.stage;
    if (name in out && owner !== decl.stage) {
      throw new UserError(`writing a ${kind} file from ${input.path}: column "${name}"`, {
        why: `it belongs to stage ${owner} and stage ${decl.stage} may not rewrite it`,
        fix: "add a new column instead of replacing an input column",
      });
    }
    out[name] = value;
  }
  return out;
}

/**
 * Metadata for a file derived from `input`: carries model, adapter, tokenizer and chat-template
 * hashes, sampling and seed, records the input's sha256 in `input_hashes` (keyed by its kind, after the
 * input's own input hashes), then applies `own`.
 */
export function inheritMetadata(input: StageFile, own: MetadataInput = {}): MetadataInput {
  const m = input.metadata;
  const carried: MetadataInput = {
    model: m.model,
    adapter: m.adapter,
    tokenizer_hash: m.tokenizer_hash,
    chat_template_hash: m.chat_template_hash,
    sampling: m.sampling,
    seed: m.seed,
    input_hashes: { ...m.input_hashes, [input.kind]: input.sha256 },
  };
  const out = { ...carried, ...own } as Record<string, unknown>;
  for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
  return out as MetadataInput;
}
