/**
 * The demo's own settings, from the `demo` section of the configuration (configs/demo.yaml; schema in
 * lib/config/sections/demo.ts): the shape of the model it builds and its supervised warm start, in the
 * camelCase the library uses. A seed left null follows `train.seed`, so one number (the demo's seed)
 * picks the model's weights, the warm start's traces and order, the LoRA init and GRPO's micro-batch order.
 *
 * @module
 */

import type { Config } from "../config/schema.ts";
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

/** The supervised warm start: generated traces, trained with the `sft` loss (docs/demo.md). */
export interface WarmStartSettings {
  /** Traces generated (one per task, from tasks disjoint from the held-out ones). */
  traces: number;
  /** Share of traces that answer at once, without the calculator, with a plausible wrong number. */
  directFraction: number;
  /**
   * Share of the calculator traces' tasks that also get a recovery trace (one call written broken, the
   * tool's error, the call written again; mix phase only): the policy learns to use a spare turn after a
   * miscopied call.
   */
  recoveryFraction: number;
  /** Seed of the choice "direct or calculator", of the wrong numbers and of the trace order. */
  seed: number;
  /** Traces per optimizer step: smaller batches buy more steps for the same time. */
  tracesPerStep: number;
  /** Peak learning rate: linear warm-up, constant through the first phase, then a cosine decay to a tenth. */
  lr: number;
  /** Warm-up steps of the learning rate. */
  warmupSteps: number;
  /** Most steps of the first phase, on calculator traces only. */
  copyMaxSteps: number;
  /** The first phase ends once the greedy probe's accuracy reaches this. */
  copyAccuracy: number;
  /** Steps between probes in the first phase. */
  probeEvery: number;
  /** Tasks the probe answers (training tasks after the traces'). */
  probeTasks: number;
  /** Steps of the second phase, on all traces. */
  mixSteps: number;
  /**
   * The second phase's first learning rate; null: the rate the first phase stopped at. Lower, the second
   * phase costs the copying less (docs/demo.md).
   */
  mixLr: number | null;
  /**
   * The most the starting policy may call the calculator (share of the probe tasks, greedy, no token
   * given): a policy that already calls it on every task leaves GRPO nothing to change but the copying it
   * cannot improve, and GRPO then loses accuracy (docs/demo.md, "A strong start"). 1 = no check.
   */
  maxStartToolUse: number;
  /** Most steps the second phase goes on for `maxStartToolUse`. */
  extraMixSteps: number;
}

export interface DemoSettings {
  model: DemoModelSettings;
  warmStart: WarmStartSettings;
}

/** The demo's settings from `config.demo`, with null seeds resolved to `train.seed`. */
export function demoSettings(config: Config): DemoSettings {
  const { model: m, warm_start: w } = config.demo;
  const seed = config.train.seed;
  return {
    model: {
      layers: m.layers,
      hidden: m.hidden,
      heads: m.heads,
      kvHeads: m.kv_heads,
      headDim: m.head_dim,
      intermediate: m.intermediate,
      seed: m.seed ?? seed,
    },
    warmStart: {
      traces: w.traces,
      directFraction: w.direct_fraction,
      recoveryFraction: w.recovery_fraction,
      seed: w.seed ?? seed,
      tracesPerStep: w.traces_per_step,
      lr: w.lr,
      warmupSteps: w.warmup_steps,
      copyMaxSteps: w.copy_max_steps,
      copyAccuracy: w.copy_accuracy,
      probeEvery: w.probe_every,
      probeTasks: w.probe_tasks,
      mixSteps: w.mix_steps,
      mixLr: w.mix_lr,
      maxStartToolUse: w.max_start_tool_use,
      extraMixSteps: w.extra_mix_steps,
    },
  };
}

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
