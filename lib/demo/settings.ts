/**
 * The demo's settings that `configs/demo.yaml` cannot hold: the config loader rejects keys outside its
 * schema, so the model's shape and the warm start live here, named and commented, next to the code
 * that uses them. Everything the stages read (data, rollout, score, mask, train, loop) is in
 * configs/demo.yaml.
 *
 * @module
 */

import type { RandomQwen3Options } from "../model/random_model.ts";

/** The demo model's shape: small enough for 2 CPU cores, deep enough to copy an expression. */
export interface DemoModelSettings {
  layers: number;
  hidden: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  intermediate: number;
  seed: number;
}

/** The supervised warm start: generated traces, trained with the `sft` loss. */
export interface WarmStartSettings {
  /** Traces generated (one per task, from tasks disjoint from the held-out ones). */
  traces: number;
  /** Share of traces that answer at once, without the calculator, with a plausible wrong number. */
  directFraction: number;
  /** Seed of the choice "direct or calculator" and of the wrong numbers. */
  seed: number;
  /** Optimizer steps in all, each on the next `tracesPerStep` traces (cycling through them). */
  steps: number;
  /** The first steps, on calculator traces only (the copying is learnt before the choice). */
  toolOnlySteps: number;
  /** Traces per optimizer step: smaller batches buy more steps for the same time. */
  tracesPerStep: number;
  /** Peak learning rate of the sft run: linear warm-up, then a cosine decay to a tenth. */
  lr: number;
  /** Warm-up steps of the learning rate. */
  warmupSteps: number;
}

export interface DemoSettings {
  model: DemoModelSettings;
  warmStart: WarmStartSettings;
}

/** The demo's defaults (measured on 2 CPU cores: docs/demo.md). */
export const DEMO_SETTINGS: DemoSettings = {
  model: { layers: 2, hidden: 128, heads: 8, kvHeads: 4, headDim: 64, intermediate: 256, seed: 0 },
  warmStart: {
    traces: 600,
    directFraction: 0.6,
    seed: 1,
    steps: 1200,
    toolOnlySteps: 900,
    tracesPerStep: 4,
    lr: 1e-2,
    warmupSteps: 50,
  },
};

/** The `writeRandomQwen3` options of a demo model with a vocabulary of `vocab` tokens. */
export function randomModelOptions(m: DemoModelSettings, vocab: number): RandomQwen3Options {
  return {
    layers: m.layers,
    hidden: m.hidden,
    heads: m.heads,
    kvHeads: m.kvHeads,
    headDim: m.headDim,
    intermediate: m.intermediate,
    seed: m.seed,
    dtype: "float32",
    tiedHead: true,
    vocab,
    tokenizer: false,
    maxPositions: 4096,
  };
}
