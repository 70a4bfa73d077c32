/**
 * Rollout progress on stderr: episodes done / total, generated tokens/s, mean turns, tool calls and
 * failures (a bar on a terminal, a plain line about every 2 s otherwise), and a one-line summary.
 *
 * @module
 */

import { progress, type ProgressTask } from "../progress.ts";
import type { Episode } from "./rollout.ts";

const NOTE_INTERVAL_MS = 1000;

export class RolloutProgress {
  readonly #task: ProgressTask | null;
  readonly #started = performance.now();
  #lastNote = 0;
  #episodes = 0;
  #tokens = 0;
  #turns = 0;
  #calls = 0;
  #failed = 0;

  constructor(total: number, show: boolean) {
    this.#task = show ? progress.start("rollout", total) : null;
  }

  add(episode: Episode): void {
    this.#episodes += 1;
    this.#tokens += episode.sampled.reduce((a, b) => a + b, 0);
    this.#turns += episode.numTurns;
    this.#calls += episode.toolCalls.length;
    this.#failed += episode.toolCalls.filter((c) => c.status !== "ok").length;
    const now = performance.now();
    const note = now - this.#lastNote >= NOTE_INTERVAL_MS ? this.#note() : undefined;
    if (note) this.#lastNote = now;
    this.#task?.tick(1, note);
  }

  done(seconds: number): void {
    this.#task?.done(`${this.#episodes} episodes in ${seconds.toFixed(1)} s, ${this.#note()}`);
  }

  #note(): string {
    const seconds = (performance.now() - this.#started) / 1000;
    const n = Math.max(this.#episodes, 1);
    return `${(this.#tokens / Math.max(seconds, 1e-9)).toFixed(0)} tok/s, ${
      (this.#turns / n).toFixed(2)
    } turns/episode, ${this.#calls} tool calls (${this.#failed} failed)`;
  }
}
