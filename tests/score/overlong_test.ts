/**
 * The overlong reward (lib/score/overlong.ts), DAPO's soft overlong punishment, through the score stage on
 * hand-built rollouts (the synthetic pieces sample one token per character plus <|im_end|> per finished
 * turn): 0 up to L_max − L_cache sampled tokens, linear to −1 at L_max, −1 above; every turn's sampled tokens
 * count, tool outputs do not. And the config: the soft zone must lie inside the limit, and the limit within
 * the episode's token budget.
 */

import assert from "node:assert/strict";
import { defaultConfig, validateConfig } from "../../lib/config/mod.ts";
import { UserError } from "../../lib/errors.ts";
import { score } from "../../lib/pipeline/mod.ts";
import { testSession } from "../helpers/session.ts";
import { type EpisodeSpec, rolloutsTable } from "../fixtures/rollouts.ts";

/** An episode of one finished turn that samples `n` tokens (n − 1 characters and <|im_end|>). */
const sampling = (n: number, group: number): EpisodeSpec => ({ group, turns: [{ text: "x".repeat(n - 1) }] });

Deno.test("overlong: 0 up to L_max − L_cache, then linear to −1 at L_max, −1 above (DAPO's rule in float64)", async () => {
  const [maxTokens, cacheTokens] = [100, 20];
  const lengths = [70, 80, 81, 85, 100, 101];
  const specs: EpisodeSpec[] = [
    ...lengths.map((n, i) => sampling(n, i)),
    // Two turns of 40 and 49 sampled tokens (89 in all) around a tool output of 50 characters (not counted).
    {
      group: 9,
      turns: [{ text: "y".repeat(39), calls: [{ status: "ok", output: "z".repeat(50) }] }, {
        text: "w".repeat(48),
      }],
    },
  ];
  const config = {
    ...defaultConfig().score,
    rewards: { overlong: 1 },
    overlong: { max_tokens: 100, cache_tokens: 20 },
  };
  const { table } = await score(testSession({ score: config }), rolloutsTable(specs));
  const rule = (n: number) =>
    n > maxTokens ? -1 : n <= maxTokens - cacheTokens ? 0 : (maxTokens - cacheTokens - n) / cacheTokens;
  const expected = [...lengths, 89].map((n) => Math.fround(rule(n)));
  assert.deepEqual(Array.from(table.getChild("reward_overlong")!.toArray() as Float32Array), expected);
  assert.deepEqual([...table.getChild("status_overlong")!], [
    "ok",
    "ok",
    "soft",
    "soft",
    "soft",
    "over",
    "soft",
  ]);
  assert.deepEqual(Array.from(table.getChild("reward")!.toArray() as Float32Array), expected);
});

Deno.test("overlong's config: the soft zone inside the limit, the limit within the episode's budget", () => {
  const refused = (raw: unknown, ...fragments: string[]) =>
    assert.throws(() => validateConfig(raw), (e: unknown) => {
      assert.ok(e instanceof UserError, String(e));
      for (const f of fragments) assert.ok(e.message.includes(f), `"${f}" in ${e.message}`);
      return true;
    });
  const on = { rewards: { gsm8k: 1, overlong: 1 } };
  refused(
    { score: { ...on, overlong: { max_tokens: 256, cache_tokens: 256 } } },
    "score.overlong.cache_tokens",
  );
  refused(
    { score: { ...on, overlong: { max_tokens: 4096 } }, rollout: { generation: { max_total_tokens: 2048 } } },
    "score.overlong.max_tokens (got 4096)",
    "2048",
  );
  // Off (not in score.rewards): its lengths are not checked.
  validateConfig({ score: { overlong: { max_tokens: 256, cache_tokens: 256 } } });
});
