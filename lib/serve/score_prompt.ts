/**
 * A prompt's log-probs for `prompt_logprobs` and `echo`: entry t is log p(token t | tokens before it)
 * at the request's temperature (1 when greedy), as the sampler's log-probs are, with the k most likely
 * alternatives at each position when k > 0. Position 0 has none.
 *
 * @module
 */

import { HttpError } from "./limits.ts";
import type { Position } from "./logprobs.ts";
import type { ServeContext } from "./serve_context.ts";

export async function scorePrompt(
  ctx: ServeContext,
  ids: readonly number[],
  temperature: number,
  k: number,
): Promise<Position[]> {
  const t = temperature > 0 ? temperature : 1;
  if (k === 0) {
    const [lp] = await ctx.policy.logprobs([ids], { temperature: t });
    return ids.map((token, i) => ({ token, logprob: i === 0 ? null : lp[i], top: null }));
  }
  if (!ctx.policy.scoreWithAlternatives) {
    throw new HttpError(
      400,
      "this policy cannot report prompt alternatives; ask for 0",
      undefined,
      "prompt_logprobs",
    );
  }
  const [scored] = await ctx.policy.scoreWithAlternatives([ids], { temperature: t, k });
  return ids.map((token, i) => ({ token, logprob: i === 0 ? null : scored.logprobs[i], top: scored.top[i] }));
}
