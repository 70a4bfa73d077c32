/**
 * Schema of the `demo` section (see schema.ts): the model `deno task demo` builds and its supervised warm
 * start (docs/demo.md). Only the demo reads it; the stages read the other sections as usual.
 */
import { float, int } from "../fields.ts";

const model = {
  layers: int({ default: 2, min: 1, max: 64, doc: "decoder layers of the demo's random-init Qwen3" }),
  hidden: int({ default: 128, min: 8, max: 8192, doc: "hidden size (embedding width)" }),
  heads: int({ default: 8, min: 1, max: 256, doc: "attention heads (query heads)" }),
  kv_heads: int({ default: 4, min: 1, max: 256, doc: "key/value heads; heads must be a multiple of it" }),
  head_dim: int({ default: 64, min: 16, max: 1024, doc: "width of one attention head (a multiple of 16)" }),
  intermediate: int({ default: 256, min: 1, max: 65536, doc: "MLP width" }),
  seed: int({
    default: null,
    nullable: true,
    min: 0,
    doc: "seed of the random weights; null = train.seed (each demo seed is a different model)",
  }),
};

const warm_start = {
  traces: int({
    default: 600,
    min: 1,
    max: 100000,
    doc: "teacher traces, one per training task (the first ones; never the held-out tasks)",
  }),
  direct_fraction: float({
    default: 0.6,
    min: 0,
    max: 1,
    maxOpen: true,
    doc: "share of traces that answer at once, without the calculator, with a plausible wrong number",
  }),
  recovery_fraction: float({
    default: 0,
    min: 0,
    max: 1,
    doc:
      "for this share of the calculator traces' tasks, a recovery trace besides: one call written broken, " +
      "the tool's error, the call written again (the broken turn has no loss; mix phase only); 0 = none",
  }),
  seed: int({
    default: null,
    nullable: true,
    min: 0,
    doc: "seed of the trace plans, wrong numbers and trace order; null = train.seed",
  }),
  traces_per_step: int({ default: 4, min: 1, max: 1024, doc: "traces per sft optimizer step" }),
  lr: float({ default: 1e-2, min: 0, minOpen: true, max: 1, doc: "peak learning rate of the sft steps" }),
  warmup_steps: int({ default: 50, min: 0, doc: "linear warm-up of the learning rate, in steps" }),
  copy_max_steps: int({
    default: 2000,
    min: 0,
    doc: "most steps of the first phase, on calculator traces only (the copying forms here)",
  }),
  copy_accuracy: float({
    default: 0.9,
    min: 0,
    max: 1,
    doc: "the first phase ends once the greedy probe's accuracy reaches this (1 = run all copy_max_steps)",
  }),
  probe_every: int({
    default: 100,
    min: 1,
    doc: "steps between greedy probes of the first phase",
  }),
  probe_tasks: int({
    default: 64,
    min: 1,
    max: 10000,
    doc: "training tasks after the traces' that the probe answers greedily (tasks the traces never showed)",
  }),
  mix_steps: int({
    default: 300,
    min: 0,
    doc: "steps of the second phase, on all traces; the learning rate decays to a tenth over them",
  }),
  mix_lr: float({
    default: null,
    nullable: true,
    min: 0,
    minOpen: true,
    doc: "learning rate the second phase starts at (then a cosine decay to a tenth of lr); null = the rate " +
      "the first phase stopped at",
  }),
  max_start_tool_use: float({
    default: 0.5,
    min: 0,
    max: 1,
    doc:
      "after the second phase, a greedy probe with no token given (the policy GRPO starts from) may call " +
      "the calculator on at most this share of the probe tasks; while it calls on more, the second phase goes " +
      "on at a tenth of lr (probing every probe_every steps, at most extra_mix_steps more); 1 = no check",
  }),
  extra_mix_steps: int({
    default: 1500,
    min: 0,
    doc: "most steps the second phase goes on for max_start_tool_use",
  }),
};

export const demo = { model, warm_start };
