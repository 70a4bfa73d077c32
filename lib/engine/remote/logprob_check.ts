/**
 * The start-up check of what a server's sampled log-probs mean. We need log p(token) under
 * softmax(logits / temperature), the distribution the token was drawn from. vLLM returns log-probs
 * before temperature (`raw_logprobs`) unless started with `--logprobs-mode processed_logprobs`, and a
 * rollout recorded with the wrong ones trains on the wrong ratio without any error.
 *
 * The check samples a few tokens at temperature 2 and has the same server score them (prompt
 * log-probs) at temperature 2 and at 1:
 * - sampled ≈ scored at 2, and not at 1: the log-probs include temperature; accepted.
 * - sampled ≈ scored at 1 (and not at 2): they are raw; refused with the fix.
 * - scored at 2 ≈ scored at 1 (the scoring ignores temperature) and sampled differ from both: the
 *   sampled log-probs are processed, but `logprobs()` at temperature ≠ 1 cannot be served; accepted,
 *   reported as `scoresTemperature: false`.
 * - anything else: refused, showing the three mean differences.
 * Where the tokens are so likely that temperature hardly changes their log-probs, the check cannot
 * tell and accepts, saying so.
 *
 * @module
 */

import { UserError } from "../../errors.ts";
import type { Policy } from "../policy.ts";

/** Temperature of the check: far enough from 1 that log-probs differ visibly. */
const CHECK_TEMPERATURE = 2;
/** Mean |Δ log-prob| below which two sets agree (servers in bf16 differ by ~1e-2 between paths). */
const AGREE = 0.05;
/** Token ids of a short prompt (Qwen3's "The capital of France is"), taken modulo the vocabulary. */
const PROMPT = [785, 6722, 315, 9625, 374];

/** What the check found. */
export interface LogprobCheck {
  verdict: "processed" | "undecided";
  /** Whether prompt log-probs honour the temperature asked for. */
  scoresTemperature: boolean;
  /** Mean |sampled − scored at T|, |sampled − scored at 1|, |scored at T − scored at 1|. */
  deltas: { sampledVsT: number; sampledVsOne: number; tVsOne: number };
}

/** A policy whose turns can be sampled and scored (ServerPolicy before the check runs). */
type Checkable = Pick<Policy, "config" | "generate" | "logprobs">;

/** Runs the check against `policy`; throws a `UserError` naming `server` and the fix on a mismatch. */
export async function checkLogprobSemantics(policy: Checkable, server: string): Promise<LogprobCheck> {
  const prompt = PROMPT.map((t) => t % policy.config.vocab_size);
  const [turn] = await policy.generate([prompt], {
    maxNewTokens: 8,
    temperature: CHECK_TEMPERATURE,
    seeds: [1234],
  });
  if (turn.tokens.length === 0) return undecided(0, 0, 0);
  const seq = [...prompt, ...turn.tokens];
  const [atT] = await policy.logprobs([seq], { temperature: CHECK_TEMPERATURE });
  const [atOne] = await policy.logprobs([seq], { temperature: 1 });
  const from = prompt.length;
  const n = turn.tokens.length;
  const sampled = (i: number) => turn.logprobs[i];
  const scoredT = (i: number) => atT[from + i];
  const scoredOne = (i: number) => atOne[from + i];
  const sampledVsT = meanAbsDiff(n, sampled, scoredT);
  const sampledVsOne = meanAbsDiff(n, sampled, scoredOne);
  const tVsOne = meanAbsDiff(n, scoredT, scoredOne);
  const deltas = { sampledVsT, sampledVsOne, tVsOne };
  if (tVsOne < AGREE && sampledVsOne < AGREE) return undecided(sampledVsT, sampledVsOne, tVsOne);
  if (sampledVsT < AGREE && sampledVsOne >= AGREE) {
    return { verdict: "processed", scoresTemperature: true, deltas };
  }
  if (tVsOne < AGREE && sampledVsOne >= AGREE) {
    return { verdict: "processed", scoresTemperature: false, deltas };
  }
  const raw = sampledVsOne < AGREE;
  throw new UserError(`inference server ${server}: sampled log-probs`, {
    value: `mean |sampled - scored| at T=${CHECK_TEMPERATURE}: ${sampledVsT.toFixed(4)}, at T=1: ${
      sampledVsOne.toFixed(4)
    }`,
    why: raw
      ? "they are taken before temperature, not from the distribution the tokens were sampled from"
      : "they do not match the server's own scoring of the same tokens",
    fix: raw
      ? "restart vLLM with --logprobs-mode processed_logprobs (docs/serving.md)"
      : "restart the server with --logprobs-mode processed_logprobs and without quantized KV caches (docs/serving.md)",
  });
}

function undecided(sampledVsT: number, sampledVsOne: number, tVsOne: number): LogprobCheck {
  return { verdict: "undecided", scoresTemperature: true, deltas: { sampledVsT, sampledVsOne, tVsOne } };
}

/** Mean of |a(i) − b(i)| over i < n where both are finite. */
function meanAbsDiff(n: number, a: (i: number) => number, b: (i: number) => number): number {
  let sum = 0;
  let count = 0;
  for (let i = 0; i < n; i++) {
    const d = Math.abs(a(i) - b(i));
    if (Number.isFinite(d)) {
      sum += d;
      count += 1;
    }
  }
  return count === 0 ? 0 : sum / count;
}
