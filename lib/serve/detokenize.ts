/**
 * Text of a turn while it is sampled, and its stop strings, as vLLM produces them:
 *
 * - `IncrementalText`: token by token, each token's text decoded in the context of the tokens before it
 *   (a window from the last stable point), so multi-byte characters split over tokens appear whole, once
 *   their last byte arrives. The final text is what `decode` of all tokens gives for byte-level BPE.
 * - `StopStrings`: the first match of any stop string in the text (searched only where new text could
 *   complete one), cut before it, or after it with `include_stop_str_in_output`; and, while streaming,
 *   how much of the text's end to hold back because it could still become a stop string.
 *
 * @module
 */

/** The text of a growing token list. */
export class IncrementalText {
  readonly #decode: (ids: number[]) => string;
  readonly #tokens: number[] = [];
  #prefix = 0;
  #read = 0;
  #text = "";

  constructor(decode: (ids: number[]) => string) {
    this.#decode = decode;
  }

  get text(): string {
    return this.#text;
  }

  /** Appends a token; the text grows once the token's characters are complete. */
  push(token: number): void {
    this.#tokens.push(token);
    this.#advance(false);
  }

  /** The text including any incomplete character at the end (the turn is over). */
  flush(): string {
    this.#advance(true);
    return this.#text;
  }

  #advance(final: boolean): void {
    if (this.#read === this.#tokens.length) return;
    const before = this.#decode(this.#tokens.slice(this.#prefix, this.#read));
    const now = this.#decode(this.#tokens.slice(this.#prefix));
    if (now.length > before.length && (final || !now.endsWith("\ufffd"))) {
      this.#text += now.slice(before.length);
      this.#prefix = this.#read;
      this.#read = this.#tokens.length;
    }
  }
}

/** A stop string found in a text. */
export interface StopMatch {
  /** Length of the text to keep. */
  end: number;
  stop: string;
}

export class StopStrings {
  readonly #stops: readonly string[];
  readonly #include: boolean;

  constructor(stops: readonly string[], includeInOutput: boolean) {
    this.#stops = stops;
    this.#include = includeInOutput;
  }

  /** The earliest stop string in `text` that ends at or after `newFrom` (the first new character). */
  find(text: string, newFrom: number): StopMatch | null {
    let best: { at: number; stop: string } | null = null;
    for (const stop of this.#stops) {
      const at = text.indexOf(stop, Math.max(0, newFrom - stop.length + 1));
      if (at >= 0 && (!best || at < best.at)) best = { at, stop };
    }
    return best && { end: this.#include ? best.at + best.stop.length : best.at, stop: best.stop };
  }

  /** Characters at the end of `text` that begin some stop string (not yet safe to send). */
  holdBack(text: string): number {
    let hold = 0;
    for (const stop of this.#stops) {
      for (let n = Math.min(stop.length - 1, text.length); n > hold; n--) {
        if (text.endsWith(stop.slice(0, n))) {
          hold = n;
          break;
        }
      }
    }
    return hold;
  }
}
