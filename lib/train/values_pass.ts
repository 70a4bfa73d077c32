/**
 * The values pass: per-token `values` of freshly sampled episodes, written by the rollout stage when the
 * algorithm has a value head (PPO), so that the mask stage stays model-free.
 *
 * It runs the trainer's own train graph (built once per run) with the adapter and value head being
 * trained, its forward alone where the trainer can (`Trainer.forward`: the same floats); the head rows are
 * the sampled tokens, and `values[t]` is the value head's V at the row that predicts token t (0 where the
 * policy did not sample: prompt and environment tokens). Choice, named: a value head inside the inference
 * graph would give the values during decoding for almost nothing, but it would have to travel through
 * the engine's Worker, scheduler and the server policies; this pass costs one train-graph pass over the
 * step's sampled tokens (as `train.loss.rollout_is`'s recomputation does) and serves local and server
 * rollouts alike. The micro-batches are laid out from the episodes in order, so the same episodes, adapter
 * and head give the same values bit for bit, in the loop and by hand.
 *
 * @module
 */

import type { LoraWeights } from "../model/lora.ts";
import { planMicroBatches, type TrainEpisode, unshift } from "./batch.ts";
import type { Tensors } from "./optimizer.ts";
import type { LossScalars, Trainer } from "./trainer.ts";

/** What the pass needs of an episode. */
export interface SampledEpisode {
  tokens: ArrayLike<number>;
  /** 1 where the policy sampled the token. */
  sampled: ArrayLike<number>;
}

/** Per-token values of every episode (0 off the sampled tokens). */
export async function valuesOf(
  trainer: Trainer,
  episodes: readonly SampledEpisode[],
  params: LoraWeights,
  valueHead: Tensors,
  o: { scalars: LossScalars; microBatchTokens: number },
): Promise<Float32Array[]> {
  const asTrain: TrainEpisode[] = episodes.map((e) => ({
    tokens: e.tokens,
    lossMask: e.sampled,
    // The graph's per-token inputs are read by the losses only, whose results this pass discards.
    inputs: Object.fromEntries(trainer.tokenInputs.map((i) => [i.name, new Float32Array(e.tokens.length)])),
  }));
  const weights = episodes.map((e) => Float32Array.from(e.sampled, (s, t) => (s && t > 0 ? 1 : 0)));
  const out = episodes.map((e) => new Float32Array(e.tokens.length));
  for (const mb of planMicroBatches(asTrain, weights, o.microBatchTokens, trainer.maxChunk)) {
    const { values } = await trainer.forward(mb, params, o.scalars, { valueHead });
    mb.episodes.forEach((e, row) => {
      const v = unshift(values!, mb, row, episodes[e].tokens.length);
      out[e] = v.map((x) => (Number.isNaN(x) ? 0 : x));
    });
  }
  return out;
}
