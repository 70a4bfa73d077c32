/**
 * Rollout progress on stderr: episodes done / total, generated tokens/s, mean turns, tool calls and
 * failures (a bar on a terminal, a plain line about every 2 s otherwise), and a one-line summary. While
 * no episode finishes for `HEARTBEAT_MS` (a large model's long episodes), a line says how long it has
 * been sampling, so a slow rollout is not taken for a hung one.
 *
 * @module
 */

import { type Progress, progress, type ProgressTask } from "../progress.ts";
import type { Episode } from "./rollout.ts";

const NOTE_INTERVAL_MS = 1000;
/** How long without a finished episode before a line says the rollout is still sampling. */
const HEARTBEAT_MS = 30_000;

export class RolloutProgress {
  readonly #task: ProgressTask | null;
  readonly #started = performance.now();
  #lastNote = 0;
  #episodes = 0;
  #tokens = 0;
  #turns = 0;
  #calls = 0;
  #failed = 0;

  #lastEpisode = performance.now();
  #heartbeat?: ReturnType<typeof setInterval>;

  /** `heartbeatMs` and `reporter` are for tests; `close` (or `done`) stops the heartbeat. */
  constructor(total: number, show: boolean, heartbeatMs = HEARTBEAT_MS, reporter: Progress = progress) {
    this.#task = show ? reporter.start("rollout", total) : null;
    if (!this.#task) return;
    this.#heartbeat = setInterval(() => this.#beat(heartbeatMs), heartbeatMs);
    Deno.unrefTimer(this.#heartbeat);
  }

  add(episode: Episode): void {
    this.#lastEpisode = performance.now();
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

  /** Stops the heartbeat; `done` calls it, and a rollout that fails must too. */
  close(): void {
    clearInterval(this.#heartbeat);
  }

  done(seconds: number): void {
    this.close();
    this.#task?.done(`${this.#episodes} episodes in ${seconds.toFixed(1)} s, ${this.#note()}`);
  }

  #beat(heartbeatMs: number): void {
    const idle = performance.now() - this.#lastEpisode;
    if (idle < heartbeatMs) return;
    const seconds = ((performance.now() - this.#started) / 1000).toFixed(0);
    this.#task?.tick(
      0,
      `still sampling after ${seconds} s (no episode finished for ${(idle / 1000).toFixed(0)} s)`,
    );
  }

  #note(): string {
    const seconds = (performance.now() - this.#started) / 1000;
    const n = Math.max(this.#episodes, 1);
    return `${(this.#tokens / Math.max(seconds, 1e-9)).toFixed(0)} tok/s, ${
      (this.#turns / n).toFixed(2)
    } turns/episode, ${this.#calls} tool calls (${this.#failed} failed)`;
  }
}
