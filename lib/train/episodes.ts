/**
 * Training episodes from a `batch.arrow` stage file: tokens, loss mask and the per-token inputs the
 * algorithm declares (algorithm.ts: e.g. the rollout log-probs and the advantages), zero-copy views of the
 * file's list columns.
 *
 * The trainer refuses a batch it cannot read whole before the model loads: every per-token list the
 * batch kind declares (`sampled`, `logprobs`, `turn_idx`, `loss_mask`, `advantages`) has one entry per
 * token in every row, `prompt_len` lies within the row's tokens, and every token id is below the
 * model's vocabulary; a column a declared input reads must be there. A file read from disk was already
 * checked by the reader (lib/arrow/validate.ts); these checks also cover batches built in memory (the
 * loop, notebooks) and the model-dependent one.
 *
 * @module
 */

import { resolveKind } from "../arrow/kinds.ts";
import type { StageFile } from "../arrow/stage_file.ts";
import { UserError } from "../errors.ts";
import type { TrainEpisode } from "./batch.ts";
import type { TokenInput } from "../losses/objective.ts";

/** The batch kind's per-token list columns, from its declaration. */
const PER_TOKEN = resolveKind("batch").allColumns.filter((c) => c.perToken).map((c) => c.name);

/** Which rows, with which inputs, checked against which vocabulary. */
export interface EpisodeOptions {
  /** The declared per-token inputs to read (those with a column); default none. */
  inputs?: readonly TokenInput[];
  /** Token ids must be below it. */
  vocabSize?: number;
  /** The rows to read (default all, in order). */
  rows?: Iterable<number>;
}

/**
 * The rows of `batch` as training episodes; a row whose per-token lists, prompt_len or token ids (with
 * `vocabSize`, below it) do not fit its tokens is refused with a UserError naming it, as is a batch
 * without a column a declared input reads.
 */
export function episodesOf(batch: StageFile, o: EpisodeOptions = {}): TrainEpisode[] {
  const inputs = (o.inputs ?? []).filter((i) => i.column !== null);
  requireInputColumns(batch, inputs);
  const perToken = [...new Set([...PER_TOKEN, ...inputs.map((i) => i.column!)])];
  const out: TrainEpisode[] = [];
  const promptLen = batch.vector("prompt_len");
  const vocabSize = o.vocabSize;
  for (const i of o.rows ?? Array.from({ length: batch.rows }, (_, i) => i)) {
    const tokens = batch.listAt<Int32Array>("tokens", i);
    for (const name of perToken) {
      const n = batch.listAt(name, i).length;
      if (n !== tokens.length) {
        refuseRow(batch, name, i, n, `it must have one entry per token (${tokens.length})`);
      }
    }
    const prompt = Number(promptLen.get(i));
    if (!(prompt >= 0 && prompt <= tokens.length)) {
      refuseRow(batch, "prompt_len", i, prompt, `it must lie within the row's ${tokens.length} tokens`);
    }
    if (vocabSize !== undefined) checkTokenIds(batch, i, tokens, vocabSize);
    out.push({
      tokens,
      lossMask: batch.listAt<Uint8Array>("loss_mask", i),
      inputs: Object.fromEntries(inputs.map((d) => [d.name, batch.listAt<Float32Array>(d.column!, i)])),
    });
  }
  return out;
}

/** Refuses a batch without a column that a declared input reads, naming the column and the input. */
export function requireInputColumns(batch: StageFile, inputs: readonly TokenInput[]): void {
  for (const input of inputs) {
    if (input.column === null || batch.has(input.column)) continue;
    throw new UserError(`stage file ${batch.path}: column "${input.column}"`, {
      why: `the train stage reads it as ${input.name} (${input.doc}) and the file has none`,
      fix: "re-run deno task mask (and the stages before it) with the config you train with",
    });
  }
}

function checkTokenIds(batch: StageFile, row: number, tokens: Int32Array, vocabSize: number): void {
  for (const id of tokens) {
    if (id < 0 || id >= vocabSize) {
      refuseRow(
        batch,
        "tokens",
        row,
        id,
        `token ids must be from 0 to the model's vocab_size ${vocabSize} - 1`,
      );
    }
  }
}

function refuseRow(batch: StageFile, column: string, row: number, value: number, why: string): never {
  throw new UserError(`stage file ${batch.path}: column "${column}" row ${row}`, {
    value,
    why,
    fix: "re-run the stages that wrote the batch (deno task rollout, then score and mask) with the " +
      "model you train (model.path)",
  });
}

/** The sampling temperature the rollouts used (from the file's metadata), or `fallback`. */
export function samplingTemperature(batch: StageFile, fallback: number): number {
  const t = (batch.metadata.sampling as { temperature?: unknown } | undefined)?.temperature;
  return typeof t === "number" && t >= 0 ? t : fallback;
}
