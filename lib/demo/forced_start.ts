/**
 * The probe's policy: the model being warm-started, with the first token of each turn given — the
 * decision the calculator traces take (`<tool_call>` in turns 1..k, where k is the task's number of calls,
 * then `Final` of `Final answer:`) — and the rest of each turn sampled by the model. The probe then
 * measures what the supervised warm start teaches, the copying (the expression into each call, each result
 * into the next call and into the answer), apart from the decisions (call or answer, in which turn) that
 * the warm start deliberately leaves mixed and GRPO learns.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type {
  GenerateOptions,
  Generation,
  Policy,
  PolicySequence,
  SequenceOptions,
} from "../engine/policy.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import { calculatorCallText, finalAnswerText } from "./teacher.ts";

/** Wraps `inner`: turn t of a task with `calls(task)` calls starts with a call while t ≤ calls, else an answer. */
export function forcedStartPolicy(
  inner: Policy,
  tokenizer: ChatTokenizer,
  tasks: readonly Task[],
  calls: (task: Task) => number,
): Policy {
  const callToken = tokenizer.encode(calculatorCallText("1"))[0];
  const answerToken = tokenizer.encode(finalAnswerText("1"))[0];
  const callsOf = (prompt: readonly number[]): number => {
    const rendered = tokenizer.decode(prompt);
    const task = tasks.find((t) => rendered.includes(`<|im_start|>user\n${t.prompt}<|im_end|>`));
    if (!task) throw new Error("forcedStartPolicy: a prompt of no task it was given");
    return calls(task);
  };
  const open = async (prompt: readonly number[], o: SequenceOptions): Promise<PolicySequence> => {
    const sequence = await inner.openSequence(prompt, o);
    const count = callsOf(prompt);
    let turn = 0;
    return {
      generate: async (g: GenerateOptions): Promise<Generation> => {
        turn += 1;
        const first = turn <= count ? callToken : answerToken;
        await sequence.append([first]);
        const rest = await sequence.generate({ ...g, maxNewTokens: Math.max(1, g.maxNewTokens - 1) });
        return { ...rest, tokens: [first, ...rest.tokens], logprobs: [0, ...rest.logprobs] };
      },
      append: (tokens) => sequence.append(tokens),
      tokens: () => sequence.tokens(),
      close: () => sequence.close(),
    };
  };
  return {
    config: inner.config,
    openSequence: open,
    adapterId: () => inner.adapterId(),
    logprobs: (seqs, options) => inner.logprobs(seqs, options),
    generate: (prompts, options) => inner.generate(prompts, options),
    startBatch: (prompts, options) => inner.startBatch(prompts, options),
    sequenceStats: () => inner.sequenceStats(),
    setAdapter: (adapter) => inner.setAdapter(adapter),
    close: () => inner.close(),
  };
}
