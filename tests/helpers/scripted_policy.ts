/**
 * TEST DOUBLE: `ScriptedPolicy` answers each turn of a sequence with the next text of a script (encoded
 * by the real tokenizer, ended by `<|im_end|>`), instead of sampling. For testing environment and
 * episode logic (tool calls, turns, budgets) that a random tiny model would never exercise; everything
 * about sampling itself is tested on the real engine.
 *
 * @module
 */

import type { ChatTokenizer } from "../../lib/model/chat.ts";
import type { Qwen3Config } from "../../lib/model/hf_config.ts";
import type { BatchStats, Generation, Policy, PolicySequence } from "../../lib/engine/policy.ts";

/** Log-prob the double reports for every scripted token. */
export const SCRIPTED_LOGPROB = -0.5;

export class ScriptedPolicy implements Policy {
  readonly config = {} as Qwen3Config;
  /** Every sequence's tokens at close, in open order. */
  readonly closed: number[][] = [];
  readonly #tokenizer: ChatTokenizer;
  readonly #script: (prompt: readonly number[], turn: number) => string;

  /** `script(prompt, turn)` gives turn `turn`'s text (1-based); the text may end early via maxNewTokens. */
  constructor(tokenizer: ChatTokenizer, script: (prompt: readonly number[], turn: number) => string) {
    this.#tokenizer = tokenizer;
    this.#script = script;
  }

  openSequence(prompt: readonly number[]): Promise<PolicySequence> {
    const tokens = [...prompt];
    let turn = 0;
    return Promise.resolve({
      generate: (o): Promise<Generation> => {
        turn += 1;
        const full = [...this.#tokenizer.encode(this.#script(prompt, turn)), this.#tokenizer.eosTokenId];
        let out = full.slice(0, o.maxNewTokens);
        // A listener (deno task serve) hears each token and may end the turn there.
        const asked = out.findIndex((token, index) =>
          o.onToken?.({ index, token, logprob: SCRIPTED_LOGPROB })
        );
        if (asked >= 0) out = out.slice(0, asked + 1);
        tokens.push(...out);
        return Promise.resolve({
          tokens: out,
          logprobs: out.map(() => SCRIPTED_LOGPROB),
          finishReason: out.length === full.length || asked >= 0 ? "stop" : "length",
        });
      },
      append: (more) => Promise.resolve(void tokens.push(...more)),
      tokens: () => Promise.resolve([...tokens]),
      close: () => Promise.resolve(void this.closed.push([...tokens])),
    });
  }

  adapterId(): Promise<string> {
    return Promise.resolve("scripted");
  }
  sequenceStats(): Promise<BatchStats> {
    return Promise.resolve({ prefillTokens: 0, prefillMs: 0, decodeSteps: 0, decodeTokens: 0, decodeMs: 0 });
  }
  logprobs(): Promise<Float32Array[]> {
    throw new Error("ScriptedPolicy: no log-probs (a test double)");
  }
  generate(): Promise<Generation[]> {
    throw new Error("ScriptedPolicy: use openSequence");
  }
  startBatch(): never {
    throw new Error("ScriptedPolicy: use openSequence");
  }
  setAdapter(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}
