/**
 * Training episodes from a `batch.arrow` stage file: tokens, loss mask, advantages and the rollout
 * log-probs, zero-copy views of the file's list columns.
 *
 * @module
 */

import type { StageFile } from "../arrow/stage_file.ts";
import { UserError } from "../errors.ts";
import type { TrainEpisode } from "./batch.ts";

/** Every row of `batch` as a training episode; rows with misaligned per-token lists are refused. */
export function episodesOf(batch: StageFile): TrainEpisode[] {
  const out: TrainEpisode[] = [];
  for (let i = 0; i < batch.rows; i++) {
    const tokens = batch.listAt<Int32Array>("tokens", i);
    const e: TrainEpisode = {
      tokens,
      lossMask: batch.listAt<Uint8Array>("loss_mask", i),
      advantages: batch.listAt<Float32Array>("advantages", i),
      oldLogprobs: batch.listAt<Float32Array>("logprobs", i),
    };
    for (
      const [name, list] of [["loss_mask", e.lossMask], ["advantages", e.advantages], [
        "logprobs",
        e.oldLogprobs,
      ]] as const
    ) {
      if (list.length !== tokens.length) {
        throw new UserError(`stage file ${batch.path}: column "${name}" row ${i}`, {
          value: list.length,
          why: `per-token lists must have one entry per token (${tokens.length})`,
          fix: "re-run the mask stage (deno task mask)",
        });
      }
    }
    out.push(e);
  }
  return out;
}

/** The sampling temperature the rollouts used (from the file's metadata), or `fallback`. */
export function samplingTemperature(batch: StageFile, fallback: number): number {
  const t = (batch.metadata.sampling as { temperature?: unknown } | undefined)?.temperature;
  return typeof t === "number" && t >= 0 ? t : fallback;
}
