/**
 * Numbers as people and models write them: `1,234.5`, `$12`, `-3`, `−3` (U+2212), `3/4`, `1 1/2`,
 * `\frac{3}{4}`, `2\frac{1}{2}`, `1{,}000`, `1\,000`, `1.5e3`, `50%`, `12 cm`, `7.`; and the tolerance under
 * which two numbers are equal.
 *
 * Equality (a choice, documented in docs/rewards.md): |pred − ref| ≤ 1e-6 · max(1, |ref|), or the
 * prediction is written with d ≥ 2 decimals and equals ref rounded to d decimals (`0.33` for 1/3,
 * `3.14` for 3.14159). One decimal is too coarse to accept (`0.3` is not 1/3).
 *
 * @module
 */

/** A parsed number and how many decimals it was written with. */
export interface ParsedNumber {
  value: number;
  decimals: number;
}

const NUM = String.raw`[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|[-+]?\.\d+`;
const MIXED = new RegExp(String.raw`^([-+]?\d+)\s+(\d+)\s*/\s*(\d+)`);
const NUMBER_OR_FRACTION = new RegExp(String.raw`(${NUM})(?:\s*/\s*(${NUM}))?`, "g");

/** Removes currency, LaTeX spacing and wrappers, so the digits stand alone. */
export function cleanNumberText(text: string): string {
  return text
    // Full-width and other compatibility digits ("７") as ASCII, as exact_match normalises them.
    .normalize("NFKC")
    .replace(/\u2212/g, "-")
    // LaTeX thousands separators between digit groups: `1{,}000`, `1\,000` (a thin space).
    .replace(/(\d)\{,\}(?=\d{3}(?!\d))/g, "$1,")
    .replace(/(\d)\\,(?=\d{3}(?!\d))/g, "$1")
    // A whole number before a fraction is a mixed number: `2\frac{1}{2}` is 2 1/2, not 21/2.
    .replace(/(\d)\s*(?=\\[dt]?frac\{)/g, "$1 ")
    .replace(/\\[dt]?frac\{([^{}]*)\}\{([^{}]*)\}/g, "($1)/($2)")
    .replace(/\\text\{([^{}]*)\}/g, " $1 ")
    .replace(/\\[,!; ]|\\left|\\right|\^\\circ|\\%|\\\$/g, " ")
    .replace(/[$€£¥]/g, " ")
    .replace(/\((\s*[-+]?[\d.,]+\s*)\)/g, "$1")
    .replace(/(\d)\s+(?=,\d{3})/g, "$1");
}

function toNumber(text: string): ParsedNumber {
  const plain = text.replace(/,/g, "");
  const dot = plain.indexOf(".");
  const exp = plain.search(/[eE]/);
  const decimals = dot < 0 ? 0 : (exp < 0 ? plain.length : exp) - dot - 1;
  return { value: Number(plain), decimals };
}

function fromMatch(m: RegExpMatchArray): ParsedNumber | undefined {
  const num = toNumber(m[1]);
  if (m[2] === undefined) return Number.isFinite(num.value) ? num : undefined;
  const den = toNumber(m[2]).value;
  if (den === 0) return undefined;
  return { value: num.value / den, decimals: 0 };
}

/** The first number in `text` (a mixed number, a fraction, or a decimal), or undefined. */
export function firstNumber(text: string): ParsedNumber | undefined {
  const clean = cleanNumberText(text).trim();
  const mixed = clean.match(MIXED);
  if (mixed) {
    const whole = Number(mixed[1]);
    const frac = Number(mixed[2]) / Number(mixed[3]);
    if (Number(mixed[3]) !== 0) return { value: whole < 0 ? whole - frac : whole + frac, decimals: 0 };
  }
  for (const m of clean.matchAll(NUMBER_OR_FRACTION)) {
    const parsed = fromMatch(m);
    if (parsed) return parsed;
  }
  return undefined;
}

/** Every number in `text` in order, a leading mixed number (`1 1/2`) counted as one. */
export function allNumbers(text: string): ParsedNumber[] {
  const clean = cleanNumberText(text).trim();
  const mixed = clean.match(MIXED);
  const first = mixed && Number(mixed[3]) !== 0 ? firstNumber(clean) : undefined;
  const rest = first ? clean.slice(mixed![0].length) : clean;
  const found = [...rest.matchAll(NUMBER_OR_FRACTION)].map(fromMatch).filter((n) => n !== undefined);
  return first ? [first, ...found] : found;
}

/** The last number in `text`, or undefined. */
export function lastNumber(text: string): ParsedNumber | undefined {
  let last: ParsedNumber | undefined;
  for (const m of cleanNumberText(text).matchAll(NUMBER_OR_FRACTION)) last = fromMatch(m) ?? last;
  return last;
}

/** Whether a predicted number equals the reference under the tolerance above. */
export function numbersMatch(pred: ParsedNumber, ref: number): boolean {
  if (Math.abs(pred.value - ref) <= 1e-6 * Math.max(1, Math.abs(ref))) return true;
  if (pred.decimals < 2) return false;
  const scale = 10 ** pred.decimals;
  return Math.abs(Math.round(ref * scale) / scale - pred.value) <= 1e-9 * Math.max(1, Math.abs(ref));
}
