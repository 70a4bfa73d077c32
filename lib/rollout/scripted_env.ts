/**
 * The scripted multi-step environment (seed 002's 50-step episodes, docs/DESIGN.md): after each
 * assistant turn without a tool call, the next user message comes from a script; a termination predicate
 * can end the episode early (`finish_reason` `env_done`); otherwise it runs until `max_turns`
 * (`max_turns`). Tool calls in a turn are answered by the tool environment, so a step may use tools
 * before it answers.
 *
 * The script is a function `(step, task) => message | null` (null: the script is over, the episode ends
 * with `env_done`), or — from the task itself, with no code — `task.meta.script`, a list of user
 * messages for steps 2, 3, …; when the list runs out, `continue_prompt` with `{step}` replaced. The
 * predicate is a function of the turn, or `task.meta.stop_phrase`: the episode ends once an answer
 * contains it (case-insensitive).
 *
 * @module
 */

import type { Task } from "../data/task.ts";
import type { AssistantTurn, Environment, EnvStep } from "./environment.ts";

/** The next user message before step `step` (2-based: step 1 is the prompt), or null when the script is over. */
export type ScriptFn = (step: number, task: Task) => string | null;
/** Whether the episode should end after this turn. */
export type StopFn = (turn: AssistantTurn, task: Task) => boolean;

export interface ScriptedOptions {
  /** Answers tool calls and gives the prompt. */
  tools: Environment;
  script?: ScriptFn;
  stop?: StopFn;
  /** Used when the task's script list runs out; `{step}` is replaced by the step number. */
  continuePrompt: string;
}

export class ScriptedEnvironment implements Environment {
  readonly #task: Task;
  readonly #tools: Environment;
  readonly #script: ScriptFn;
  readonly #stop: StopFn;

  constructor(task: Task, options: ScriptedOptions) {
    this.#task = task;
    this.#tools = options.tools;
    this.#script = options.script ?? scriptFromTask(options.continuePrompt);
    this.#stop = options.stop ?? stopPhraseOfTask;
  }

  reset() {
    return this.#tools.reset();
  }

  async close(): Promise<void> {
    await this.#tools.close?.();
  }

  async step(turn: AssistantTurn): Promise<EnvStep> {
    // A turn cut at max_new_tokens is a step like any other here (seed 002's fixed-length steps); its
    // unfinished tool calls are not run. A finished turn with tool calls goes on with their results.
    if (turn.finishReason === "stop") {
      const answered = await this.#tools.step(turn);
      if (answered.toolCalls?.length || answered.reason === "tool_budget") return answered;
    }
    if (this.#stop(turn, this.#task)) return { messages: [], done: true, reason: "env_done" };
    const next = this.#script(turn.turn + 1, this.#task);
    if (next === null) return { messages: [], done: true, reason: "env_done" };
    return { messages: [{ role: "user", content: next }], done: false };
  }
}

/** `task.meta.script[step - 2]`, then the continue prompt. */
function scriptFromTask(continuePrompt: string): ScriptFn {
  return (step, task) => {
    const script = task.meta?.script;
    const listed = Array.isArray(script) ? script[step - 2] : undefined;
    return typeof listed === "string" ? listed : continuePrompt.replaceAll("{step}", String(step));
  };
}

/** Ends the episode when the answer contains `task.meta.stop_phrase` (case-insensitive). */
function stopPhraseOfTask(turn: AssistantTurn, task: Task): boolean {
  const phrase = task.meta?.stop_phrase;
  return typeof phrase === "string" && phrase.length > 0 &&
    turn.text.toLowerCase().includes(phrase.toLowerCase());
}
