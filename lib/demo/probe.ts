/**
 * The warm start's probe: the adapter being trained answers a few training tasks greedily (temperature
 * 0) through the pipeline's evaluate stage (the real rollout, tools and score code), on tasks the traces
 * never showed and that are not held out — with the first token of each turn given (forced_start.ts), so
 * that it measures the copying the warm start teaches, not the call-or-answer decisions it leaves to
 * GRPO. The warm start ends its calculator-only phase when the probe's accuracy shows that the copying
 * works (warm_start.ts), instead of after a fixed number of steps.
 *
 * The probe samples with the warm-start session's own policy (the model's weights are shared with the
 * trainer where `model.shared_weights` is on), pointed at a copy of the adapter as it stands.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { Policy } from "../engine/policy.ts";
import type { Adapter } from "../model/lora.ts";
import { evaluate, openSession, type Session } from "../pipeline/mod.ts";
import { forcedStartPolicy } from "./forced_start.ts";
import { calculatorCalls } from "./traces.ts";

/** What one probe measured after `step` warm-start steps. */
export interface ProbeResult {
  step: number;
  /** Share of probe tasks answered correctly. */
  accuracy: number;
  /** Share of episodes with a calculator call that ran without error. */
  toolUse: number;
  /** Calculator calls that ran without error, per episode. */
  callsOk: number;
}

/** Greedy answers of the adapter being trained on a few unseen training tasks. */
export class WarmStartProbe {
  readonly #policy: Policy;
  readonly #session: Session;
  readonly #tasks: readonly Task[];

  private constructor(policy: Policy, session: Session, tasks: readonly Task[]) {
    this.#policy = policy;
    this.#session = session;
    this.#tasks = tasks;
  }

  /**
   * A probe on the policy of `warm` (the warm-start session, which closes it), each turn's first token
   * given as the task's calculator trace has it — or, with `firstTokenGiven` false, the policy as GRPO
   * will start from it (every decision its own).
   */
  static async open(
    warm: Session,
    tasks: readonly Task[],
    { firstTokenGiven = true }: { firstTokenGiven?: boolean } = {},
  ): Promise<WarmStartProbe> {
    const { config } = warm;
    const [inner, tokenizer, tools] = [await warm.policy(), await warm.tokenizer(), await warm.tools()];
    const max = config.rollout.tools.calculator.max_operations;
    const forced = firstTokenGiven
      ? forcedStartPolicy(inner, tokenizer, tasks, (task) => calculatorCalls(task, max).length)
      : inner;
    const greedy = { ...config, eval: { ...config.eval, temperature: 0, samples: 1 } };
    // The probe's own session opens nothing (its policy, tokenizer and tools are the warm-start session's,
    // which closes them), so there is nothing of its own to close.
    const session = openSession(greedy, warm.configHash, {
      adapter: null,
      showProgress: false,
      open: { policy: forced, tokenizer, tools },
    });
    return new WarmStartProbe(forced, session, tasks);
  }

  /** Answers the probe tasks with `adapter` (its weights copied: training goes on changing them). */
  async run(step: number, adapter: Adapter): Promise<ProbeResult> {
    const weights = new Map([...adapter.weights].map(([key, value]) => [key, value.slice()]));
    await this.#policy.setAdapter({ spec: adapter.spec, weights });
    const { summary, table } = await evaluate(this.#session, { step, tasks: this.#tasks });
    const ok = Array.from(table.getChild("tool_calls_ok")!.toArray() as Int16Array);
    return {
      step,
      accuracy: summary.accuracy,
      toolUse: summary.tool_use_rate,
      callsOk: ok.reduce((a, b) => a + b, 0) / Math.max(ok.length, 1),
    };
  }
}
