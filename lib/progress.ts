/**
 * What a stage is doing, as it goes, on stderr (stdout stays for results):
 *
 *   const task = progress.start("train", 30);   // label, optional count
 *   task.tick(1, "loss 0.6931");                 // n more done, and a note on the latest
 *   task.done("30 steps in 12.1 s");
 *   progress.log("wrote runs/x/adapter");        // a line that does not disturb a bar
 *
 * On a terminal a task with a count is one redrawn bar (`train [#####-----] 15/30 loss 0.6931`). When
 * stderr is not a terminal (CI, a log file) every line is plain: one at the start, the first tick that
 * carries a note, then at most one tick every `PLAIN_INTERVAL_MS` (showing the latest note) and the last
 * one, and one at the end: a thousand warm-start steps in a log are a few dozen lines, not a thousand.
 *
 * @module
 */

const PLAIN_INTERVAL_MS = 2000;

/** Off a terminal: the first noted tick prints at once; any other once the interval has passed. */
function plainDue(last: number, now: number, firstNote: boolean): boolean {
  return firstNote || now - last >= PLAIN_INTERVAL_MS;
}
const BAR_WIDTH = 24;

/** Where progress goes; tests pass their own sink. */
export interface ProgressSink {
  write(text: string): void;
  isTerminal: boolean;
}

/** One piece of work being reported. */
export interface ProgressTask {
  /** Marks `n` more units done; `extra` describes the latest one (a loss, a rate). */
  tick(n?: number, extra?: string): void;
  /** Ends the task with a one-line summary. */
  done(summary?: string): void;
}

export class Progress {
  #sink: ProgressSink;
  #bar: string | null = null;

  readonly #now: () => number;

  /** `now` (milliseconds) is the clock of the plain lines' interval; tests pass their own. */
  constructor(sink: ProgressSink = stderrSink(), now: () => number = () => performance.now()) {
    this.#sink = sink;
    this.#now = now;
  }

  /** Starts a task; `total` (when known) gives a bar and `count/total`. */
  start(label: string, total?: number): ProgressTask {
    let count = 0, lastPlain = this.#now(), noted = false;
    const started = performance.now();
    const terminal = this.#sink.isTerminal;
    const counted = () => total === undefined ? `${count}` : `${count}/${total}`;
    if (terminal && total !== undefined) this.#draw(`${label} ${bar(0, total)} 0/${total}`);
    else this.log(`${label} …`);
    return {
      tick: (n = 1, extra) => {
        count += n;
        const note = extra ? ` ${extra}` : "";
        if (terminal) {
          this.#draw(`${label} ${total === undefined ? "" : bar(count, total) + " "}${counted()}${note}`);
        } else if (plainDue(lastPlain, this.#now(), Boolean(extra) && !noted) || count === total) {
          noted ||= Boolean(extra);
          lastPlain = this.#now();
          this.log(`${label} ${counted()}${note}`);
        }
      },
      done: (summary) => {
        const seconds = ((performance.now() - started) / 1000).toFixed(1);
        this.#clear();
        this.log(`${label}: ${summary ?? `done in ${seconds} s`}`);
      },
    };
  }

  /** Prints one line, keeping a bar (if any) below it. */
  log(line: string): void {
    const bar = this.#bar;
    this.#clear();
    this.#sink.write(`${line}\n`);
    if (bar !== null) this.#draw(bar);
  }

  #draw(text: string): void {
    this.#sink.write(`\r\x1b[2K${text}`);
    this.#bar = text;
  }

  #clear(): void {
    if (this.#bar === null) return;
    this.#sink.write("\r\x1b[2K");
    this.#bar = null;
  }
}

function bar(count: number, total: number): string {
  const filled = total > 0 ? Math.min(BAR_WIDTH, Math.round((count / total) * BAR_WIDTH)) : BAR_WIDTH;
  return `[${"#".repeat(filled)}${"-".repeat(BAR_WIDTH - filled)}]`;
}

function stderrSink(): ProgressSink {
  const encoder = new TextEncoder();
  let isTerminal = false;
  try {
    isTerminal = Deno.stderr.isTerminal();
  } catch {
    // no terminal information: plain lines
  }
  return { write: (text) => Deno.stderr.writeSync(encoder.encode(text)), isTerminal };
}

/** The process-wide progress reporter (stderr). */
export const progress: Progress = new Progress();
