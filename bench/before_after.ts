/**
 * `deno task bench --only engine,train --before REV`: this checkout and an older one against the same peers,
 * in one run. Each of `bench.rounds` rounds runs the older checkout's bench script and this one's (the
 * order alternating between rounds, so that neither always runs first on a machine that drifts), then the
 * peer once; both ratios of a round divide by that one peer figure. The peers' code is the same before and
 * after, so what moves a round's two ratios apart is our own speed, not the peer's noise: their quotient,
 * after / before, is ours after over ours before. The tables give it per round, with the median and the
 * geometric mean over rounds (the one to read with an even number of rounds: each order runs equally often).
 *
 * @module
 */

// deno-lint-ignore-file no-explicit-any -- results are JSON from the benchmark processes

import { median } from "./measure.ts";
import { fixedOrDash as f } from "./report.ts";

/** A benchmark process's last JSON object, or its error. */
export type Json = Record<string, any>;

/** How to run each side and the peers (bench.ts owns the processes and the paths). */
export interface BeforeAfterRunner {
  /** This checkout's root and the older one's. */
  after: string;
  before: string;
  /** bench/<script> of the checkout at `root` with `args`, in its own process. */
  script(root: string, script: string, args: string[]): Promise<Json>;
  /** The engine bench's flags, the same for both checkouts. */
  engineArgs: string[];
  /** The train bench's flags, the same for both; `afterOnly` are given to this checkout's run alone. */
  trainArgs: string[];
  trainAfterOnly: string[];
  /** transformers.js's decode at each batch size; PyTorch's train step on the batch the train bench wrote. */
  decodePeer(): Promise<Json[]>;
  trainPeer(): Promise<Json>;
}

type Side = "before" | "after";

/** One round: each side's result and the peer's, for the sections asked for. */
export interface Round {
  order: Side[];
  engine?: { before: Json; after: Json; peer: Json[] };
  train?: { before: Json; after: Json; peer: Json };
}

/** Runs `rounds` rounds of the sections asked for. */
export async function beforeAfterRounds(
  r: BeforeAfterRunner,
  rounds: number,
  sections: { engine: boolean; train: boolean },
  log: (line: string) => void = console.error,
): Promise<Round[]> {
  const out: Round[] = [];
  for (let i = 0; i < rounds; i++) {
    const order: Side[] = i % 2 === 0 ? ["before", "after"] : ["after", "before"];
    const round: Round = { order };
    const both = async (section: string, script: string, args: string[], afterOnly: string[] = []) => {
      const got: Record<Side, Json> = { before: {}, after: {} };
      for (const side of order) {
        log(`round ${i + 1}/${rounds}: ${section}, ${side} …`);
        got[side] = await r.script(r[side], script, side === "after" ? [...args, ...afterOnly] : args);
      }
      return got;
    };
    if (sections.engine) {
      const got = await both("engine", "engine_bench.ts", r.engineArgs);
      log(`round ${i + 1}/${rounds}: transformers.js …`);
      round.engine = { ...got, peer: await r.decodePeer() };
    }
    if (sections.train) {
      const got = await both("train", "train_bench.ts", r.trainArgs, r.trainAfterOnly);
      log(`round ${i + 1}/${rounds}: PyTorch …`);
      round.train = { ...got, peer: await r.trainPeer() };
    }
    out.push(round);
  }
  return out;
}

/** Decode tok/s at `batch` of an engine result (undefined where it failed or lacks the batch). */
function oursDecode(x: Json, batch: number): number | undefined {
  return x.batches?.find((b: any) => b.batch === batch)?.decode_tok_per_s;
}

function peerDecode(peer: Json[], batch: number): number | undefined {
  return peer.find((p) => p.batch === batch)?.decodeTokensPerSecond;
}

function div(a: number | undefined, b: number | undefined): number | undefined {
  return a !== undefined && b !== undefined && b > 0 ? a / b : undefined;
}

/** The figures the rounds produced (a failed side gives none). */
function measured(xs: (number | undefined)[]): number[] {
  return xs.filter((x): x is number => x !== undefined && Number.isFinite(x) && x > 0);
}

/** The median of the figures the rounds produced (undefined when none did). */
function medianMeasured(xs: (number | undefined)[]): number | undefined {
  const got = measured(xs);
  return got.length ? median(got) : undefined;
}

/**
 * The geometric mean of the figures the rounds produced: for quotients (after / before), the average that
 * treats 0.8 and 1.25 as opposite moves. With an even number of rounds each order runs as often, so a
 * machine that slows (or speeds) whichever side runs second cancels out of it.
 */
function geometricMean(xs: (number | undefined)[]): number | undefined {
  const got = measured(xs);
  return got.length ? Math.exp(got.reduce((sum, x) => sum + Math.log(x), 0) / got.length) : undefined;
}

/** Decode and train ratios, before and after, per round and as medians over the rounds. */
export function beforeAfterTables(name: string, before: string, rounds: Round[]): string[] {
  return [
    ...engineRows(name, before, rounds.filter((x) => x.engine)),
    ...trainRows(name, before, rounds.filter((x) => x.train)),
  ];
}

function engineRows(name: string, before: string, rounds: Round[]): string[] {
  if (rounds.length === 0) return [];
  const batches: number[] = (rounds[0].engine!.after.batches ?? rounds[0].engine!.before.batches ?? [])
    .map((b: any) => b.batch);
  const per = (pick: (e: NonNullable<Round["engine"]>, batch: number) => number | undefined) => (e: Round) =>
    batches.map((batch) => pick(e.engine!, batch));
  const cols = {
    before: per((e, b) => oursDecode(e.before, b)),
    after: per((e, b) => oursDecode(e.after, b)),
    peer: per((e, b) => peerDecode(e.peer, b)),
    ratioBefore: per((e, b) => div(oursDecode(e.before, b), peerDecode(e.peer, b))),
    ratioAfter: per((e, b) => div(oursDecode(e.after, b), peerDecode(e.peer, b))),
    paired: per((e, b) => div(oursDecode(e.after, b), oursDecode(e.before, b))),
  };
  const cell = (xs: (number | undefined)[], digits: number) => xs.map((x) => f(x, digits)).join(" / ");
  const over = (mean: typeof medianMeasured) => (col: (e: Round) => (number | undefined)[]) =>
    batches.map((_, i) => mean(rounds.map((e) => col(e)[i])));
  const row = (label: string, get: (col: (e: Round) => (number | undefined)[]) => (number | undefined)[]) =>
    `| ${label} | ${cell(get(cols.ratioBefore), 2)} | ${cell(get(cols.ratioAfter), 2)} | ${
      cell(get(cols.paired), 2)
    } | ${cell(get(cols.before), 0)} | ${cell(get(cols.after), 0)} | ${cell(get(cols.peer), 0)} |`;
  return [
    `### Decode before (${before}) and after, ${name}: ours / transformers.js at batch ${
      batches.join(" / ")
    }`,
    "",
    "Each round runs both checkouts' engine bench, then transformers.js once; both ratios of a round divide by " +
    "that one peer figure, so their quotient (after / before) is ours after over ours before.",
    "",
    "| round (order) | ratio before | ratio after | after / before | ours before tok/s | ours after tok/s | transformers.js tok/s |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rounds.map((e, i) => row(`${i + 1} (${e.order.join(", ")})`, (col) => col(e))),
    row("median", over(medianMeasured)),
    row("geometric mean", over(geometricMean)),
    "",
  ];
}

function trainRows(name: string, before: string, rounds: Round[]): string[] {
  if (rounds.length === 0) return [];
  const t = (e: Round) => e.train!;
  const cols = {
    before: (e: Round) => t(e).before.seconds_per_step as number | undefined,
    after: (e: Round) => t(e).after.seconds_per_step as number | undefined,
    peer: (e: Round) => t(e).peer.seconds_per_step as number | undefined,
    ratioBefore: (e: Round) => div(t(e).before.tok_per_s, t(e).peer.tok_per_s),
    ratioAfter: (e: Round) => div(t(e).after.tok_per_s, t(e).peer.tok_per_s),
    paired: (e: Round) => div(t(e).after.tok_per_s, t(e).before.tok_per_s),
  };
  const row = (label: string, get: (col: (e: Round) => number | undefined) => number | undefined) =>
    `| ${label} | ${f(get(cols.ratioBefore), 2)} | ${f(get(cols.ratioAfter), 2)} | ${
      f(get(cols.paired), 2)
    } | ${f(get(cols.before), 3)} | ${f(get(cols.after), 3)} | ${f(get(cols.peer), 3)} |`;
  const tokens = t(rounds[0]).after.tokens_per_step ?? t(rounds[0]).before.tokens_per_step ?? "?";
  return [
    `### Train step before (${before}) and after, ${name}: ours / PyTorch (tok/s), ${tokens} tokens`,
    "",
    "| round (order) | ratio before | ratio after | after / before | ours before s/step | ours after s/step | PyTorch s/step |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ...rounds.map((e, i) => row(`${i + 1} (${e.order.join(", ")})`, (col) => col(e))),
    row("median", (col) => medianMeasured(rounds.map(col))),
    row("geometric mean", (col) => geometricMean(rounds.map(col))),
    "",
  ];
}
