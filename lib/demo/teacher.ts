/**
 * The warm start's teacher: a `Policy` that writes the demo's traces instead of sampling them, so the
 * real rollout code (chat template, tool-call parsing, the calculator, the appended `<tool_response>`
 * turn) produces the demonstrations, in exactly the format and with exactly the `sampled` provenance of
 * the policy's own episodes.
 *
 * Two kinds of trace, chosen per task by `plan(task)`:
 * - `tool`: turn k calls `calculator` with the plan's k-th expression (the task's expression, or with a
 *   calculator limited to one operation per call, its steps, each using the result the tool gave before);
 *   the turn after the last call says `Final answer: <the tool's last result>`. A recovery trace (`broken`)
 *   first writes one of the calls broken, reads the tool's error, then writes the call right;
 * - `direct`: turn 1 says `Final answer: <a plausible wrong number>` and the episode ends.
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { BatchStats, Generation, Policy, PolicySequence, TokenEvent } from "../engine/policy.ts";
import type { ChatTokenizer } from "../model/chat.ts";
import type { Qwen3Config } from "../model/hf_config.ts";

/**
 * What the teacher does on one task: the calculator calls' expressions in order (a recovery trace
 * writing one of them broken first), or a direct answer.
 */
export type TracePlan = ToolPlan | { kind: "direct"; answer: string };

/** Calculator calls, one expression per call, in order; a recovery trace writes one of them broken first. */
export interface ToolPlan {
  kind: "tool";
  calls: string[];
  broken?: BrokenCall;
}

/** A recovery trace's broken call: the assistant text written in place of call `at` (0-based) before it. */
export interface BrokenCall {
  at: number;
  text: string;
}

/** The assistant turns of a `tool` plan before its final answer: its calls, the broken one in its place. */
export function toolTurnTexts(plan: ToolPlan): string[] {
  const texts = plan.calls.map(calculatorCallText);
  if (plan.broken) texts.splice(plan.broken.at, 0, plan.broken.text);
  return texts;
}

/** The assistant text of a calculator call, as Qwen3 writes tool calls (Hermes format). */
export function calculatorCallText(expression: string): string {
  // Spaced as the template's `tojson` writes it: {"name": "calculator", "arguments": {"expression": …}}.
  const call = `{"name": "calculator", "arguments": {"expression": ${JSON.stringify(expression)}}}`;
  return `<tool_call>\n${call}\n</tool_call>`;
}

/** The assistant text of a final answer. */
export function finalAnswerText(answer: string): string {
  return `Final answer: ${answer}`;
}

/** The content of the last `<tool_response>` block of `text` (trimmed), or null. */
export function lastToolResponse(text: string): string | null {
  const open = text.lastIndexOf("<tool_response>");
  const close = text.lastIndexOf("</tool_response>");
  if (open < 0 || close < open) return null;
  return text.slice(open + "<tool_response>".length, close).trim();
}

/** What opens each assistant turn in the rendered conversation (its generation prompt included). */
const ASSISTANT_HEADER = "<|im_start|>assistant";

/**
 * The written tokens as a sampler reports them: each one to `onToken` (a gateway reads the turn's text
 * from it), up to the first one it asks to end the turn at, kept (as the engine does).
 */
function reported(written: number[], onToken?: (e: TokenEvent) => boolean | void): number[] {
  if (!onToken) return written;
  const out: number[] = [];
  for (const [index, token] of written.entries()) {
    out.push(token);
    if (onToken({ index, token, logprob: 0 }) === true) break;
  }
  return out;
}

/** A policy whose turns are the traces `plan` chooses for the task in each prompt. */
export class TeacherPolicy implements Policy {
  readonly config = {} as Qwen3Config;
  readonly #tokenizer: ChatTokenizer;
  readonly #tasks: readonly Task[];
  readonly #plan: (task: Task) => TracePlan;

  constructor(tokenizer: ChatTokenizer, tasks: readonly Task[], plan: (task: Task) => TracePlan) {
    this.#tokenizer = tokenizer;
    this.#tasks = tasks;
    this.#plan = plan;
  }

  openSequence(prompt: readonly number[]): Promise<PolicySequence> {
    const tokens = [...prompt];
    const task = this.#taskOf(this.#tokenizer.decode(prompt));
    return Promise.resolve({
      generate: (o): Promise<Generation> => {
        const text = this.#turnText(task, this.#tokenizer.decode(tokens));
        const written = [...this.#tokenizer.encode(text), this.#tokenizer.eosTokenId].slice(
          0,
          o.maxNewTokens,
        );
        const out = reported(written, o.onToken);
        tokens.push(...out);
        const stopped = out.length < written.length || out.at(-1) === this.#tokenizer.eosTokenId;
        return Promise.resolve({
          tokens: out,
          logprobs: out.map(() => 0),
          finishReason: stopped ? "stop" : "length",
        });
      },
      append: (more) => Promise.resolve(void tokens.push(...more)),
      tokens: () => Promise.resolve([...tokens]),
      close: () => Promise.resolve(),
    });
  }

  /**
   * The text of the turn `soFar` (the conversation through its generation prompt) asks for. The turn is
   * counted from the conversation, not per sequence: a gateway opens a new sequence for every request.
   */
  #turnText(task: Task, soFar: string): string {
    const turn = soFar.split(ASSISTANT_HEADER).length - 1;
    const plan = this.#plan(task);
    if (plan.kind === "direct") return finalAnswerText(plan.answer);
    const calls = toolTurnTexts(plan);
    if (turn <= calls.length) return calls[turn - 1];
    return finalAnswerText(lastToolResponse(soFar) ?? task.answer!);
  }

  /** The task whose prompt the rendered conversation holds (the last match: the user turn, not the system). */
  #taskOf(rendered: string): Task {
    const task = this.#tasks.find((t) => rendered.includes(`<|im_start|>user\n${t.prompt}<|im_end|>`));
    if (!task) throw new Error("TeacherPolicy: a prompt of no task it was given");
    return task;
  }

  adapterId(): Promise<string> {
    return Promise.resolve("teacher");
  }
  sequenceStats(): Promise<BatchStats> {
    return Promise.resolve({ prefillTokens: 0, prefillMs: 0, decodeSteps: 0, decodeTokens: 0, decodeMs: 0 });
  }
  logprobs(): Promise<Float32Array[]> {
    return Promise.reject(new Error("TeacherPolicy writes traces; it has no log-probs"));
  }
  generate(): Promise<Generation[]> {
    return Promise.reject(new Error("TeacherPolicy: use openSequence"));
  }
  startBatch(): never {
    throw new Error("TeacherPolicy: use openSequence");
  }
  setAdapter(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
